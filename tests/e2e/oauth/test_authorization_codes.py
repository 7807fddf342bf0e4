"""Authorization codes at rest and after use (issue 13, item 11): the database holds only a code's
checksum, a code waiting during the upgrade still works once hashed, and a code presented again
revokes every token its first exchange issued (RFC 6749 section 4.1.2), with an audit row."""

from __future__ import annotations

import asyncio
import importlib

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.apps import apps as installed_apps
from django.utils import timezone

from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.models import AccessToken, Grant, RefreshToken, UsedAuthorizationCode
from oauth.token_storage import token_checksum
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import OAuthDriver
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body

pytestmark = pytest.mark.django_db


async def _mcp_status(driver: OAuthDriver, access_token: str) -> int:
    response = await driver.http.post(
        "/mcp", json=initialize_body(), headers={**MCP_HEADERS, "authorization": f"Bearer {access_token}"}
    )
    return response.status_code


async def _refresh(driver: OAuthDriver, *, client_id: str, refresh_token: str) -> httpx.Response:
    return await driver.http.post(
        "/oauth/token/",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
    )


def _text_columns_holding(value: str) -> list[str]:
    """Every text column of the OAuth tables that holds ``value`` anywhere."""
    return [
        f"{model._meta.db_table}.{field.column}"
        for model in (Grant, AccessToken, RefreshToken, UsedAuthorizationCode)
        for field in model._meta.concrete_fields
        if field.get_internal_type() in {"CharField", "TextField"}
        and model.objects.filter(**{f"{field.name}__contains": value}).exists()
    ]


async def test_the_database_holds_no_plaintext_code_before_or_after_the_exchange(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))

    assert await sync_to_async(_text_columns_holding)(code) == []
    assert await Grant.objects.filter(code=token_checksum(code)).aexists()

    response = await driver.exchange(client_id=client_id, code=code, verifier=verifier)
    assert response.status_code == 200, response.text
    assert await sync_to_async(_text_columns_holding)(code) == []
    assert not await Grant.objects.filter(code=token_checksum(code)).aexists()


async def test_a_code_issued_before_the_upgrade_still_works_once_the_migration_hashed_it(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))
    # As the previous release stored it.
    assert await Grant.objects.filter(code=token_checksum(code)).aupdate(code=code) == 1
    migration = importlib.import_module("oauth.migrations.0007_authorization_codes_hashed")

    await sync_to_async(migration._hash_codes)(installed_apps, None)
    await sync_to_async(migration._hash_codes)(installed_apps, None)  # twice: a checksum stays as it is

    assert await Grant.objects.filter(code=token_checksum(code)).aexists()
    response = await driver.exchange(client_id=client_id, code=code, verifier=verifier)
    assert response.status_code == 200, response.text


async def test_a_replayed_code_is_refused_and_ends_the_tokens_its_first_exchange_issued(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))
    first = await driver.exchange(client_id=client_id, code=code, verifier=verifier)
    assert first.status_code == 200, first.text
    tokens = first.json()
    # The client goes on refreshing: the pair rotated from the first one must end too.
    rotated = await _refresh(driver, client_id=client_id, refresh_token=tokens["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    assert await _mcp_status(driver, rotated.json()["access_token"]) == 200

    replay = await driver.exchange(client_id=client_id, code=code, verifier=verifier)

    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert await _mcp_status(driver, tokens["access_token"]) == 401
    assert await _mcp_status(driver, rotated.json()["access_token"]) == 401
    refused = await _refresh(driver, client_id=client_id, refresh_token=rotated.json()["refresh_token"])
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"
    event = await AuditEvent.objects.select_related("user", "application").aget(
        action=AuditAction.CODE_REPLAYED, client_id=client_id
    )
    assert event.outcome == AuditOutcome.DENIED
    assert event.user is not None
    assert event.user.username == "alice"
    assert event.detail["revoked_access"] >= 1
    assert event.detail["revoked_refresh"] >= 1
    assert code not in str(event.detail)


async def test_a_code_exchanged_twice_at_once_leaves_no_working_token(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))

    responses = await asyncio.gather(
        *(driver.exchange(client_id=client_id, code=code, verifier=verifier) for _ in range(2))
    )

    statuses = sorted(r.status_code for r in responses)
    assert statuses in ([200, 400], [400, 400]), [r.text for r in responses]
    for response in responses:
        if response.status_code == 200:
            assert await _mcp_status(driver, response.json()["access_token"]) == 401
            refresh_token = response.json()["refresh_token"]
            again = await _refresh(driver, client_id=client_id, refresh_token=refresh_token)
            assert again.status_code == 400
    assert await AuditEvent.objects.filter(action=AuditAction.CODE_REPLAYED, client_id=client_id).aexists()


async def test_used_codes_are_forgotten_after_their_time(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))
    assert (await driver.exchange(client_id=client_id, code=code, verifier=verifier)).status_code == 200
    used = UsedAuthorizationCode.objects.filter(code_checksum=token_checksum(code))
    assert await used.aexists()
    await used.aupdate(remember_until=timezone.now())
    # The next exchange purges what is past its time.
    other_client, other_code, other_verifier = await driver.code_for(Person("alice"))
    exchanged = await driver.exchange(client_id=other_client, code=other_code, verifier=other_verifier)
    assert exchanged.status_code == 200
    assert not await used.aexists()

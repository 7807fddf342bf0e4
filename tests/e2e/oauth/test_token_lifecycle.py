"""Refresh rotation, its grace window, reuse detection, revocation and tokens at rest, through
real HTTP against Daphne: what an attacker holding a copied token, or a client refreshing in
parallel, actually gets."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import F

from accounts.models import Membership, Tenant, User
from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.models import AccessToken, RefreshToken
from oauth.services import BY_CLIENT, BY_REUSE_DETECTION
from oauth.token_storage import token_checksum
from tests.e2e.conftest import _serve
from tests.e2e.harness import DaphneServer, Person
from tests.e2e.oauth_driver import OAuthDriver
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

# Long against two parallel refreshes on a busy machine: a test never waits it out, it moves a
# rotation back in time past it (``_rotated_ago``).
GRACE_SECONDS = 60


@pytest.fixture(scope="module")
def grace_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(tmp_path_factory, database_url, "grace", OAUTH_REFRESH_GRACE_SECONDS=str(GRACE_SECONDS))


@pytest.fixture
async def grace_driver(grace_server) -> AsyncIterator[OAuthDriver]:
    driver = OAuthDriver(grace_server)
    yield driver
    await driver.aclose()


def _request_id() -> str:
    return "e2e-tokens-" + secrets.token_hex(8)


async def _refresh(
    http: httpx.AsyncClient, *, client_id: str, refresh_token: str, request_id: str = "", **extra: str
) -> httpx.Response:
    return await http.post(
        "/oauth/token/",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, **extra},
        headers={"X-Request-Id": request_id or _request_id()},
    )


async def _mcp_status(driver: OAuthDriver, access_token: str) -> int:
    response = await driver.http.post(
        "/mcp", json=initialize_body(), headers={**MCP_HEADERS, "authorization": f"Bearer {access_token}"}
    )
    return response.status_code


async def _refresh_in_parallel(driver: OAuthDriver, tokens: dict[str, Any]) -> list[httpx.Response]:
    return list(
        await asyncio.gather(
            *(
                _refresh(driver.http, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"])
                for _ in range(2)
            )
        )
    )


async def _rotated_ago(refresh_token: str, *, seconds: int) -> None:
    """Date a rotated refresh token's rotation ``seconds`` earlier, as if that time had passed."""
    moved = await RefreshToken.objects.filter(
        token_checksum=token_checksum(refresh_token), revoked__isnull=False
    ).aupdate(revoked=F("revoked") - timedelta(seconds=seconds))
    assert moved == 1


async def _events(request_id: str) -> list[AuditEvent]:
    return [
        event
        async for event in AuditEvent.objects.filter(request_id=request_id).select_related("user", "tenant")
    ]


async def test_parallel_refreshes_inside_the_grace_window_both_get_a_working_pair(driver):
    tokens = await driver.token_for(Person("alice"))

    responses = await _refresh_in_parallel(driver, tokens)

    assert [r.status_code for r in responses] == [200, 200], [r.text for r in responses]
    pairs = [r.json() for r in responses]
    assert pairs[0]["access_token"] != pairs[1]["access_token"]
    assert pairs[0]["refresh_token"] != pairs[1]["refresh_token"]
    for pair in pairs:
        assert await _mcp_status(driver, pair["access_token"]) == 200
    assert await _mcp_status(driver, tokens["access_token"]) == 401, "the rotated pair's access token ends"
    for pair in pairs:
        once = await _refresh(driver.http, client_id=tokens["client_id"], refresh_token=pair["refresh_token"])
        assert once.status_code == 200, once.text
    families = {
        row.token_family
        async for row in RefreshToken.objects.filter(
            token_checksum__in=[token_checksum(p["refresh_token"]) for p in [tokens, *pairs]]
        )
    }
    assert len(families) == 1, "every pair belongs to the one grant"


async def test_parallel_refreshes_on_two_workers_both_get_a_working_pair(driver, second_server):
    tokens = await driver.token_for(Person("alice"))
    async with httpx.AsyncClient(base_url=second_server.base_url, timeout=30) as other_worker:
        # Several rounds: whichever worker takes the lock first, the other must still succeed.
        for _ in range(3):
            responses = await asyncio.gather(
                _refresh(driver.http, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"]),
                _refresh(other_worker, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"]),
            )
            assert [r.status_code for r in responses] == [200, 200], [r.text for r in responses]
            for response in responses:
                assert await _mcp_status(driver, response.json()["access_token"]) == 200
            tokens = {**responses[1].json(), "client_id": tokens["client_id"]}


async def test_a_refresh_token_reused_after_the_grace_window_revokes_its_whole_family(grace_driver):
    driver = grace_driver
    tokens = await driver.token_for(Person("alice"))
    responses = await _refresh_in_parallel(driver, tokens)
    assert [r.status_code for r in responses] == [200, 200], [r.text for r in responses]
    pairs = [r.json() for r in responses]
    # 40 s after the rotation, past the default window but inside this server's, a replay still gets
    # a pair...
    await _rotated_ago(tokens["refresh_token"], seconds=GRACE_SECONDS - 20)
    late = await _refresh(driver.http, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"])
    assert late.status_code == 200, late.text
    pairs.append(late.json())
    # ...and once the window has passed, it is a replay.
    await _rotated_ago(tokens["refresh_token"], seconds=21)

    request_id = _request_id()
    replay = await _refresh(
        driver.http,
        client_id=tokens["client_id"],
        refresh_token=tokens["refresh_token"],
        request_id=request_id,
    )

    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    for pair in pairs:
        assert await _mcp_status(driver, pair["access_token"]) == 401
        again = await _refresh(
            driver.http, client_id=tokens["client_id"], refresh_token=pair["refresh_token"]
        )
        assert again.json()["error"] == "invalid_grant"
    events = await _events(request_id)
    failed = [e for e in events if e.action == AuditAction.TOKEN_REFRESHED]
    assert [(e.outcome, e.detail) for e in failed] == [
        (AuditOutcome.ERROR, {"grant_type": "refresh_token", "error": "invalid_grant"})
    ]
    assert failed[0].client_id == tokens["client_id"]
    revoked = [e for e in events if e.action == AuditAction.TOKEN_REVOKED]
    assert sorted(e.detail["kind"] for e in revoked) == ["access"] * 3 + ["refresh"] * 3
    assert {(e.detail["by"], e.username, e.tenant_id) for e in revoked} == {
        (BY_REUSE_DETECTION, "alice", (await Tenant.objects.aget(slug="acme")).pk)
    }


async def test_revoking_a_refresh_token_stops_the_access_tokens_issued_from_it(driver):
    tokens = await driver.token_for(Person("alice"))
    pairs = [r.json() for r in await _refresh_in_parallel(driver, tokens)]
    request_id = _request_id()

    response = await driver.http.post(
        "/oauth/revoke/",
        data={
            "token": pairs[0]["refresh_token"],
            "token_type_hint": "refresh_token",
            "client_id": tokens["client_id"],
        },
        headers={"X-Request-Id": request_id},
    )

    assert response.status_code == 200
    for pair in pairs:
        assert await _mcp_status(driver, pair["access_token"]) == 401
    other = await _refresh(
        driver.http, client_id=tokens["client_id"], refresh_token=pairs[1]["refresh_token"]
    )
    assert other.json()["error"] == "invalid_grant"
    events = await _events(request_id)
    assert sorted((e.action, e.detail["kind"], e.detail["by"]) for e in events) == [
        (AuditAction.TOKEN_REVOKED, "access", BY_CLIENT),
        (AuditAction.TOKEN_REVOKED, "access", BY_CLIENT),
        (AuditAction.TOKEN_REVOKED, "refresh", BY_CLIENT),
        (AuditAction.TOKEN_REVOKED, "refresh", BY_CLIENT),
    ]


async def test_a_code_cannot_be_redeemed_by_another_client(driver):
    _, code, verifier = await driver.code_for(Person("alice"))
    thief = await driver.register()

    response = await driver.exchange(client_id=thief, code=code, verifier=verifier)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert "access_token" not in response.json()


async def test_a_refresh_token_cannot_be_used_by_another_client_nor_is_it_spent(driver):
    tokens = await driver.token_for(Person("alice"))
    thief = await driver.register()

    stolen = await _refresh(driver.http, client_id=thief, refresh_token=tokens["refresh_token"])

    assert stolen.status_code == 400
    assert stolen.json()["error"] == "invalid_grant"
    rightful = await _refresh(
        driver.http, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"]
    )
    assert rightful.status_code == 200, rightful.text


async def test_a_refresh_cannot_reach_another_resource(driver):
    tokens = await driver.token_for(Person("alice"))

    response = await _refresh(
        driver.http,
        client_id=tokens["client_id"],
        refresh_token=tokens["refresh_token"],
        resource="https://elsewhere.example/mcp",
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


async def _eve_with_tokens(driver: OAuthDriver, committed) -> tuple[User, dict[str, Any]]:
    tenant = await Tenant.objects.aget(slug="acme")
    eve = committed(UserFactory, username="eve-tokens")
    committed(MembershipFactory, user=eve, tenant=tenant, role="admin")
    return eve, await driver.token_for(Person("eve-tokens", password=DEFAULT_PASSWORD))


async def test_a_deactivated_person_can_neither_use_nor_refresh_their_tokens(driver, committed):
    eve, tokens = await _eve_with_tokens(driver, committed)
    await User.objects.filter(pk=eve.pk).aupdate(is_active=False)

    assert await _mcp_status(driver, tokens["access_token"]) == 401
    refresh = await _refresh(
        driver.http, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"]
    )
    assert refresh.status_code == 400
    assert refresh.json()["error"] == "invalid_grant"


async def test_a_person_removed_from_the_tenant_can_no_longer_refresh(driver, committed):
    eve, tokens = await _eve_with_tokens(driver, committed)
    await Membership.objects.filter(user=eve).adelete()

    refresh = await _refresh(
        driver.http, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"]
    )
    assert refresh.status_code == 400
    assert refresh.json()["error"] == "invalid_grant"


def _tables_containing(values: list[str]) -> dict[str, list[str]]:
    """Every table of the database whose rows, read as text, contain one of the values."""
    found: dict[str, list[str]] = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            quoted = connection.ops.quote_name(table)
            for value in values:
                cursor.execute(f"SELECT 1 FROM {quoted} t WHERE strpos(t::text, %s) > 0 LIMIT 1", [value])  # noqa: S608
                if cursor.fetchone():
                    found.setdefault(table, []).append(value)
    return found


async def test_the_database_holds_no_token_in_plaintext(driver):
    tokens = await driver.token_for(Person("alice"))
    pairs = [r.json() for r in await _refresh_in_parallel(driver, tokens)]
    assert await _mcp_status(driver, pairs[0]["access_token"]) == 200
    raw = [p[kind] for p in [tokens, *pairs] for kind in ("access_token", "refresh_token")]

    found = await sync_to_async(_tables_containing)(raw + [token_checksum(value) for value in raw])

    assert not [value for values in found.values() for value in values if value in raw], found
    # The search itself works: what is stored in place of each token is found.
    assert set(found) >= {AccessToken._meta.db_table, RefreshToken._meta.db_table}

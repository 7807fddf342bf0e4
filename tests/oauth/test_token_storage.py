"""Tokens are kept as checksums only; rotated refresh tokens get a grace window, then end their family."""

from __future__ import annotations

import base64
import hashlib
import importlib
import secrets
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.core import checks
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import Application
from oauthlib.common import Request

from accounts.models import Membership
from core.models import AuditAction, AuditEvent
from oauth.models import AccessToken, RefreshToken
from oauth.services import BY_OPERATOR, BY_REUSE_DETECTION, refresh_token_revoke
from oauth.token_storage import token_checksum
from oauth.validators import TENANT_ATTRIBUTE, TenantOAuth2Validator
from tests.support.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    GrantFactory,
    MembershipFactory,
    RefreshTokenFactory,
)

pytestmark = pytest.mark.django_db

REDIRECT_URI = "http://127.0.0.1:9/callback"


@pytest.fixture
def application() -> Application:
    return ApplicationFactory.create()


@pytest.fixture
def grace(settings):
    """Set the refresh grace window for one test."""

    def set_seconds(seconds: int) -> None:
        settings.GATEHOUSE = {**settings.GATEHOUSE, "OAUTH_REFRESH_GRACE_SECONDS": seconds}

    return set_seconds


def _issue(client: Client, *, application: Application, membership: Membership) -> dict[str, Any]:
    """A token pair through the real token endpoint, from a PKCE grant like the consent page makes."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    code = secrets.token_urlsafe(30)
    GrantFactory.create(
        code=token_checksum(code),
        membership=membership,
        application=application,
        redirect_uri=REDIRECT_URI,
        scope="mcp:read",
        code_challenge=challenge,
        code_challenge_method="S256",
        resource=[django_settings.MCP_RESOURCE_URL],
    )
    response = client.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": application.client_id,
            "code_verifier": verifier,
        },
    )
    assert response.status_code == 200, response.content
    return response.json()


def _refresh(client: Client, *, application: Application, refresh_token: str) -> Any:
    return client.post(
        "/oauth/token/",
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": application.client_id},
    )


def _refresh_row(raw: str) -> RefreshToken:
    return RefreshToken.objects.get(token_checksum=token_checksum(raw))


def _access_exists(raw: str) -> bool:
    return AccessToken.objects.filter(token_checksum=token_checksum(raw)).exists()


def test_issued_tokens_are_stored_as_checksums_only(client, application, member):
    pair = _issue(client, application=application, membership=member)
    refreshed = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()

    for raw in (pair["refresh_token"], refreshed["refresh_token"]):
        row = _refresh_row(raw)
        assert row.token == ""
        assert row.token_checksum == hashlib.sha256(raw.encode()).hexdigest()
    access = AccessToken.objects.get(token_checksum=token_checksum(refreshed["access_token"]))
    assert access.token == ""


def test_a_refresh_rotates_the_pair_and_ends_the_old_access_token(client, application, member):
    pair = _issue(client, application=application, membership=member)
    refreshed = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()

    assert refreshed["refresh_token"] != pair["refresh_token"]
    assert _refresh_row(pair["refresh_token"]).revoked is not None
    assert not _access_exists(pair["access_token"])
    assert _access_exists(refreshed["access_token"])


def test_a_rotated_token_presented_inside_the_window_gets_a_new_pair_in_the_same_family(
    client, application, member, grace
):
    grace(30)
    pair = _issue(client, application=application, membership=member)
    first = _refresh(client, application=application, refresh_token=pair["refresh_token"])
    second = _refresh(client, application=application, refresh_token=pair["refresh_token"])

    assert first.status_code == second.status_code == 200
    first_pair, second_pair = first.json(), second.json()
    assert first_pair["access_token"] != second_pair["access_token"]
    assert first_pair["refresh_token"] != second_pair["refresh_token"]
    assert second_pair["scope"] == "mcp:read"
    assert _access_exists(first_pair["access_token"])
    assert _access_exists(second_pair["access_token"])
    families = {_refresh_row(p["refresh_token"]).token_family for p in (pair, first_pair, second_pair)}
    assert len(families) == 1
    new = AccessToken.objects.get(token_checksum=token_checksum(second_pair["access_token"]))
    assert new.tenant_id == member.tenant_id
    assert new.resource == [django_settings.MCP_RESOURCE_URL]
    # Each new refresh token works once more.
    for p in (first_pair, second_pair):
        assert _refresh(client, application=application, refresh_token=p["refresh_token"]).status_code == 200


def test_a_rotated_token_presented_after_the_window_revokes_its_family_and_audits_it(
    client, application, member, grace
):
    grace(30)
    pair = _issue(client, application=application, membership=member)
    first = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()
    second = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()
    # The window closes.
    RefreshToken.objects.filter(token_checksum=token_checksum(pair["refresh_token"])).update(
        revoked=timezone.now() - timedelta(seconds=31)
    )

    replay = _refresh(client, application=application, refresh_token=pair["refresh_token"])

    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    for p in (first, second):
        assert not _access_exists(p["access_token"])
        assert _refresh_row(p["refresh_token"]).revoked is not None
        assert _refresh(client, application=application, refresh_token=p["refresh_token"]).status_code == 400
    revoked = AuditEvent.objects.filter(action=AuditAction.TOKEN_REVOKED, detail__by=BY_REUSE_DETECTION)
    assert sorted(e.detail["kind"] for e in revoked) == ["access", "access", "refresh", "refresh"]
    assert {(e.user_id, e.tenant_id) for e in revoked} == {(member.user_id, member.tenant_id)}


def test_with_no_window_a_second_use_is_already_a_replay(client, application, member, grace):
    grace(0)
    pair = _issue(client, application=application, membership=member)
    first = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()

    assert _refresh(client, application=application, refresh_token=pair["refresh_token"]).status_code == 400
    assert not _access_exists(first["access_token"])


def test_a_token_revoked_on_purpose_is_refused_inside_the_window(client, application, member, grace):
    grace(30)
    pair = _issue(client, application=application, membership=member)
    response = client.post(
        "/oauth/revoke/", {"token": pair["refresh_token"], "client_id": application.client_id}
    )
    assert response.status_code == 200

    assert _refresh(client, application=application, refresh_token=pair["refresh_token"]).status_code == 400


def test_a_token_replayed_from_two_rotations_back_is_refused_inside_the_window(
    client, application, member, grace
):
    grace(30)
    pair = _issue(client, application=application, membership=member)
    first = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()
    second = _refresh(client, application=application, refresh_token=first["refresh_token"]).json()

    replay = _refresh(client, application=application, refresh_token=pair["refresh_token"])

    assert replay.status_code == 400
    assert not _access_exists(second["access_token"]), "the replay ended the family"


def test_a_refresh_that_loses_the_race_for_the_lock_gets_its_own_pair(client, application, member, grace):
    """The second of two parallel refreshes validated the token while it was live, and finds it
    rotated once it holds the lock: it mints a pair instead of replaying the first one's."""
    grace(30)
    pair = _issue(client, application=application, membership=member)
    stale = _refresh_row(pair["refresh_token"])
    assert _refresh(client, application=application, refresh_token=pair["refresh_token"]).status_code == 200

    request = Request("/oauth/token/", http_method="POST")
    request.client = application
    request.user = member.user
    request.grant_type = "refresh_token"
    request.refresh_token_instance = stale
    setattr(request, TENANT_ATTRIBUTE, member.tenant_id)
    access, refresh = secrets.token_urlsafe(30), secrets.token_urlsafe(30)
    token = {"access_token": access, "refresh_token": refresh, "scope": "mcp:read", "expires_in": 900}
    TenantOAuth2Validator().save_bearer_token(token, request)

    assert token["access_token"] == access, "the response carries the new pair"
    minted = _refresh_row(refresh)
    assert minted.token == ""
    assert minted.access_token.token == ""
    assert minted.token_family == stale.token_family
    assert minted.access_token.tenant_id == member.tenant_id


def test_revoking_a_refresh_token_ends_every_token_of_its_grant(client, application, member, grace):
    grace(30)
    pair = _issue(client, application=application, membership=member)
    first = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()
    second = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()

    response = client.post(
        "/oauth/revoke/",
        {
            "token": first["refresh_token"],
            "token_type_hint": "refresh_token",
            "client_id": application.client_id,
        },
    )

    assert response.status_code == 200
    assert not _access_exists(first["access_token"])
    assert not _access_exists(second["access_token"])
    assert _refresh(client, application=application, refresh_token=second["refresh_token"]).status_code == 400
    kinds = AuditEvent.objects.filter(action=AuditAction.TOKEN_REVOKED, detail__by="client")
    assert sorted(e.detail["kind"] for e in kinds) == ["access", "access", "refresh", "refresh"]


def test_another_client_cannot_revoke_a_refresh_token(client, application, member):
    pair = _issue(client, application=application, membership=member)
    other = ApplicationFactory.create()

    response = client.post("/oauth/revoke/", {"token": pair["refresh_token"], "client_id": other.client_id})

    assert response.status_code == 200
    assert _access_exists(pair["access_token"])
    assert _refresh_row(pair["refresh_token"]).revoked is None


def test_an_operator_revoking_a_refresh_token_ends_its_family(client, application, member, grace):
    grace(30)
    pair = _issue(client, application=application, membership=member)
    first = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()
    second = _refresh(client, application=application, refresh_token=pair["refresh_token"]).json()

    counts = refresh_token_revoke(token=_refresh_row(pair["refresh_token"]), by=BY_OPERATOR)

    assert (counts.access, counts.refresh) == (2, 2)
    assert not _access_exists(first["access_token"])
    assert not _access_exists(second["access_token"])


def test_the_migration_blanks_plaintext_and_keeps_tokens_findable():
    migration = importlib.import_module("oauth.migrations.0003_token_storage")
    refresh = RefreshTokenFactory.create(token_family=None)
    access_raw, refresh_raw = refresh.access_token.token, refresh.token
    assert access_raw
    assert refresh_raw

    migration.tokens_hash_at_rest(apps, None)

    access = AccessToken.objects.get(token_checksum=token_checksum(access_raw))
    stored = RefreshToken.objects.get(token_checksum=token_checksum(refresh_raw))
    assert access.token == ""
    assert stored.token == ""
    assert stored.token_family is not None


def test_the_migration_fills_a_missing_checksum_before_blanking():
    migration = importlib.import_module("oauth.migrations.0003_token_storage")
    token = AccessTokenFactory.create()
    raw = token.token
    AccessToken.objects.filter(pk=token.pk).update(token_checksum="")

    migration.tokens_hash_at_rest(apps, None)

    assert AccessToken.objects.get(pk=token.pk).token_checksum == token_checksum(raw)


def test_hashed_storage_passes_dot_s_checks_because_its_grace_period_stays_zero():
    from oauth2_provider.settings import oauth2_settings

    assert oauth2_settings.COMPLIANT_BCP_RFC9700_TOKEN_STORAGE is True
    assert oauth2_settings.REFRESH_TOKEN_GRACE_PERIOD_SECONDS == 0
    messages = checks.run_checks(include_deployment_checks=True)
    # E001: hashed storage with DOT's grace period; W006: tokens stored in plaintext.
    assert not [m for m in messages if m.id in {"oauth2_provider.E001", "oauth2_provider.W006"}]


def test_a_person_removed_from_the_tenant_cannot_refresh(client, application):
    membership = MembershipFactory.create(role="admin")
    pair = _issue(client, application=application, membership=membership)
    membership.delete()

    assert _refresh(client, application=application, refresh_token=pair["refresh_token"]).status_code == 400

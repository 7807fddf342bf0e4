"""Two exchanges of one code at once: whichever finishes second gets a clean invalid_grant.

The competing exchange can delete the grant at any moment after this one's ``validate_code``
passed: between it and the PKCE check, the redirect check, or the final delete. Each of those
reads must answer from what ``validate_code`` saw, so the request ends in the replay path (a 400
and an audit row) and never in a missing-row 500.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

import pytest
from django.conf import settings as django_settings
from django.test import Client

from core.models import AuditAction, AuditEvent
from oauth.code_replay import IssuedTokens, used_code_record
from oauth.models import AccessToken, Grant
from oauth.token_storage import token_checksum
from oauth.validators import TenantOAuth2Validator
from tests.support.factories import ApplicationFactory, GrantFactory

pytestmark = pytest.mark.django_db

REDIRECT_URI = "http://127.0.0.1:9/callback"


def _grant(*, membership) -> tuple[Grant, str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    code = secrets.token_urlsafe(30)
    grant = GrantFactory.create(
        code=token_checksum(code),
        membership=membership,
        application=ApplicationFactory.create(),
        redirect_uri=REDIRECT_URI,
        scope="mcp:read",
        code_challenge=challenge,
        code_challenge_method="S256",
        resource=[django_settings.MCP_RESOURCE_URL],
    )
    return grant, code, verifier


def _exchange(client: Client, *, grant: Grant, code: str, verifier: str):
    return client.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": grant.application.client_id,
            "code_verifier": verifier,
        },
    )


def _the_other_exchange_finishes(grant: Grant) -> None:
    """What the winning exchange's ``invalidate_authorization_code`` leaves behind."""
    used_code_record(
        code_checksum=grant.code, grant=grant, issued=IssuedTokens(family=None, access_checksum="")
    )
    Grant.objects.filter(pk=grant.pk).delete()


@pytest.mark.parametrize(
    "after", ["validate_code", "get_code_challenge", "get_code_challenge_method", "confirm_redirect_uri"]
)
def test_a_grant_deleted_by_a_parallel_exchange_ends_in_invalid_grant(client, member, monkeypatch, after):
    grant, code, verifier = _grant(membership=member)
    original = getattr(TenantOAuth2Validator, after)

    def then_lose_the_race(self, *args, **kwargs):
        answer = original(self, *args, **kwargs)
        if Grant.objects.filter(pk=grant.pk).exists():
            _the_other_exchange_finishes(grant)
        return answer

    monkeypatch.setattr(TenantOAuth2Validator, after, then_lose_the_race)

    response = _exchange(client, grant=grant, code=code, verifier=verifier)

    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_grant"
    replayed = AuditEvent.objects.get(action=AuditAction.CODE_REPLAYED, application=grant.application)
    assert replayed.detail["parallel"] is True
    assert not AccessToken.objects.filter(application=grant.application).exists(), "its tokens were revoked"


def test_an_unraced_exchange_still_works(client, member):
    grant, code, verifier = _grant(membership=member)
    assert _exchange(client, grant=grant, code=code, verifier=verifier).status_code == 200

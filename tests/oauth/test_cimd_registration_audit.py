"""A client ID metadata document registers its client the first time it is used: one audit event."""

from __future__ import annotations

import pytest
from django.test import Client

from core.models import AuditAction, AuditEvent
from tests.support.oauth_support import authorize

CLIENT_ID = "https://client.example/oauth/metadata.json"
REDIRECT_URI = "https://client.example/callback"


class StaticFetcher:
    """DOT's fetcher extension point (CIMD_METADATA_FETCHER), answering without the network."""

    def fetch(self, client_id: str) -> tuple[dict, int]:
        return (
            {
                "client_id": client_id,
                "client_name": "Metadata Document Client",
                "redirect_uris": [REDIRECT_URI],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
            3600,
        )


@pytest.fixture
def cimd_fetcher(settings):
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "CIMD_METADATA_FETCHER": "tests.oauth.test_cimd_registration_audit.StaticFetcher",
    }


def test_the_first_use_of_a_metadata_document_is_audited_as_a_registration_once(cimd_fetcher, owner):
    browser = Client()
    browser.force_login(owner.user)

    first = authorize(browser, client_id=CLIENT_ID, redirect_uri=REDIRECT_URI)
    second = authorize(browser, client_id=CLIENT_ID, redirect_uri=REDIRECT_URI)

    assert first.status_code == second.status_code == 200
    [event] = AuditEvent.objects.filter(action=AuditAction.CLIENT_REGISTERED)
    assert event.client_id == CLIENT_ID
    assert event.target == "Metadata Document Client"
    assert event.detail == {"redirect_uris": [REDIRECT_URI], "registration_source": "cimd"}

"""Every way a request can fail to authenticate at /mcp answers 401 with a usable challenge."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from accounts.models import Membership
from tests.e2e.conftest import person_of
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import OAuthDriver
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def post_initialize(server, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        server.mcp_url, json=initialize_body(), headers={**MCP_HEADERS, **(headers or {})}, timeout=10
    )


def assert_challenge(response: httpx.Response, server, *, error: str | None) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{server.base_url}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert (
        'scope="data_agent:write llm:invoke mcp:read mcp:write ontologies:read usage:read'
        ' workflows:agent workflows:read workflows:run"'
    ) in challenge
    if error:
        assert f'error="{error}"' in challenge
    else:
        assert "error=" not in challenge


def test_no_token_is_challenged_without_an_error_code(server):
    assert_challenge(post_initialize(server), server, error=None)


def test_a_garbage_token_is_refused(server):
    response = post_initialize(server, {"authorization": "Bearer not-a-real-token"})
    assert_challenge(response, server, error="invalid_token")


def test_a_malformed_authorization_header_is_refused(server):
    response = post_initialize(server, {"authorization": "Basic YWxpY2U6c2VjcmV0"})
    assert_challenge(response, server, error="invalid_token")


def test_an_expired_token_is_refused(server, committed):
    token = committed(AccessTokenFactory, expires=timezone.now() - timedelta(seconds=1))
    response = post_initialize(server, {"authorization": f"Bearer {token.token}"})
    assert_challenge(response, server, error="invalid_token")
    assert "expired" in response.json()["error_description"]


def test_a_token_for_another_resource_is_refused(server, committed):
    token = committed(AccessTokenFactory, resource=["https://elsewhere.example/mcp"])
    response = post_initialize(server, {"authorization": f"Bearer {token.token}"})
    assert_challenge(response, server, error="invalid_token")
    assert "resource" in response.json()["error_description"]


@pytest.mark.parametrize("resources", [["api"], ["mcp", "api"]], ids=["api", "mcp-and-api"])
def test_a_token_for_the_api_is_refused(server, committed, resources):
    # The API is a resource of its own: its tokens, even one naming /mcp beside it, open no session.
    urls = {"mcp": server.mcp_url, "api": f"{server.public_url}/api"}
    membership = committed(MembershipFactory)
    token = committed(AccessTokenFactory, membership=membership, resource=[urls[r] for r in resources])
    response = post_initialize(server, {"authorization": f"Bearer {token.token}"})
    assert_challenge(response, server, error="invalid_token")
    assert "resource" in response.json()["error_description"]


def test_a_token_issued_for_this_resource_is_accepted(server, committed):
    membership = committed(MembershipFactory)
    token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url])
    response = post_initialize(server, {"authorization": f"Bearer {token.token}"})
    assert response.status_code == 200, response.text


async def test_a_revoked_token_is_refused(server):
    driver = OAuthDriver(server)
    try:
        tokens = await driver.token_for(Person("alice"))
        assert (
            post_initialize(server, {"authorization": f"Bearer {tokens['access_token']}"}).status_code == 200
        )
        revoked = await driver.http.post(
            "/oauth/revoke/", data={"token": tokens["access_token"], "client_id": tokens["client_id"]}
        )
        assert revoked.status_code == 200
    finally:
        await driver.aclose()
    response = post_initialize(server, {"authorization": f"Bearer {tokens['access_token']}"})
    assert_challenge(response, server, error="invalid_token")


async def test_removing_a_membership_stops_the_token_at_once(server, own_admin):
    driver = OAuthDriver(server)
    try:
        tokens = await driver.token_for(person_of(own_admin))
    finally:
        await driver.aclose()
    await Membership.objects.filter(pk=own_admin.pk).adelete()
    response = post_initialize(server, {"authorization": f"Bearer {tokens['access_token']}"})
    assert_challenge(response, server, error="invalid_token")


def test_a_foreign_host_header_is_refused(server, committed):
    token = committed(AccessTokenFactory, resource=[server.mcp_url])
    response = post_initialize(server, {"authorization": f"Bearer {token.token}", "host": "evil.example"})
    assert response.status_code == 421


def test_a_foreign_origin_is_refused(server, committed):
    token = committed(AccessTokenFactory, resource=[server.mcp_url])
    response = post_initialize(
        server, {"authorization": f"Bearer {token.token}", "origin": "https://evil.example"}
    )
    assert response.status_code == 403


def test_the_server_s_own_origin_is_accepted(server, committed):
    membership = committed(MembershipFactory)
    token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url])
    response = post_initialize(server, {"authorization": f"Bearer {token.token}", "origin": server.base_url})
    assert response.status_code == 200

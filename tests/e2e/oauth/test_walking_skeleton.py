"""The whole path a real client takes: discovery, registration, login, consent, PKCE, MCP, refresh."""

from __future__ import annotations

import time

import pytest
from oauth2_provider.models import Application

from oauth.models import AccessToken, RefreshToken
from oauth.token_storage import token_checksum
from tests.e2e.harness import ACME_ADMIN_TOOLS, Person, sdk_client
from tests.support.waiting import clock_past

pytestmark = pytest.mark.django_db


async def test_the_sdk_client_signs_in_consents_and_calls_whoami(server):
    alice = Person("alice")
    async with sdk_client(server, alice) as (client, storage):
        tools = await client.list_tools()
        assert {tool.name for tool in tools.tools} == ACME_ADMIN_TOOLS
        whoami = next(tool for tool in tools.tools if tool.name == "whoami")
        assert whoami.output_schema is not None

        result = await client.call_tool("whoami", {})

    assert result.is_error is False
    identity = result.structured_content
    assert identity["user"]["username"] == "alice"
    assert identity["tenant"] == {"slug": "acme", "name": "Acme"}
    assert identity["role"] == "admin"
    assert identity["scopes"] == [
        "data_agent:write",
        "llm:invoke",
        "mcp:read",
        "mcp:write",
        "ontologies:read",
        "usage:read",
        "workflows:agent",
        "workflows:read",
        "workflows:run",
    ]
    assert identity["client"]["name"] == "Gatehouse e2e client"
    assert alice.logins == 1
    assert storage.client_info is not None
    assert storage.tokens is not None
    application = await Application.objects.aget(client_id=storage.client_info.client_id)
    assert application.client_type == Application.CLIENT_PUBLIC
    token = await AccessToken.objects.select_related("tenant").aget(
        token_checksum=token_checksum(storage.tokens.access_token)
    )
    assert token.tenant.slug == "acme"
    assert token.resource == [server.mcp_url]


async def test_the_sdk_client_also_works_on_the_stateless_2026_protocol(server):
    async with sdk_client(server, Person("alice"), mode="auto") as (client, _):
        result = await client.call_tool("whoami", {})
    assert result.structured_content["user"]["username"] == "alice"


async def test_the_client_refreshes_an_expired_token_and_carries_on(short_token_server):
    alice = Person("alice")
    async with sdk_client(short_token_server, alice) as (client, storage):
        first = await client.call_tool("whoami", {})
        first_tokens = storage.tokens
        assert first_tokens is not None
        assert first_tokens.expires_in is not None
        # Past the access token's lifetime as the client counts it, from when it got the token
        # (before this moment): the client refreshes only a token it sees expired.
        await clock_past(time.time() + first_tokens.expires_in)
        second = await client.call_tool("whoami", {})

    assert first.structured_content == second.structured_content
    assert alice.logins == 1, "the client refreshed instead of sending the person back to log in"
    assert storage.tokens is not None
    assert storage.tokens.access_token != first_tokens.access_token
    assert storage.tokens.refresh_token != first_tokens.refresh_token
    assert first_tokens.refresh_token is not None
    old_refresh = await RefreshToken.objects.aget(token_checksum=token_checksum(first_tokens.refresh_token))
    assert old_refresh.revoked is not None, "refresh tokens rotate on use"
    new_token = await AccessToken.objects.select_related("tenant").aget(
        token_checksum=token_checksum(storage.tokens.access_token)
    )
    assert new_token.tenant.slug == "acme", "the tenant travels with the refreshed token"

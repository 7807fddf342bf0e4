"""A scope refusal the caller can cure by authorizing again also says so at the HTTP level
(403 insufficient_scope with the scopes to ask for), so clients step up on their own."""

from __future__ import annotations

import httpx
import pytest
from mcp.shared.auth import OAuthToken

from tests.e2e.conftest import person_of
from tests.e2e.harness import MemoryTokenStorage, sdk_client
from tests.e2e.raw_mcp import RawMcp
from tests.support.factories import AccessTokenFactory, ApplicationFactory, MembershipFactory

pytestmark = pytest.mark.django_db

SET_NAME = {"name": "set_display_name", "arguments": {"display_name": "Stepped Up"}}


MODERN_HEADERS = {
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "set_display_name",
}


def _modern(method: str, params: dict) -> dict:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}


async def _set_name_standalone(server, token: str) -> httpx.Response:
    """``set_display_name`` as one 2026-07-28 request, outside any session."""
    raw = RawMcp(token)
    try:
        return await raw.http.post(
            server.mcp_url, json=_modern("tools/call", SET_NAME), headers=raw.headers(**MODERN_HEADERS)
        )
    finally:
        await raw.aclose()


@pytest.fixture
def read_only_token(server, committed):
    """An admin's token that asked for mcp:read only, as a cautious client would."""

    def make(role: str) -> str:
        membership = committed(MembershipFactory, role=role)
        application = committed(ApplicationFactory)
        token = committed(
            AccessTokenFactory,
            scope="mcp:read",
            membership=membership,
            application=application,
            resource=[server.mcp_url],
        )
        return str(token.token)

    return make


async def test_a_standalone_call_missing_a_scope_the_role_allows_gets_a_403_challenge(
    server, read_only_token
):
    response = await _set_name_standalone(server, read_only_token("admin"))
    assert response.status_code == 403, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="mcp:read mcp:write"' in challenge
    assert "resource_metadata=" in challenge
    error = response.json()["error"]
    assert error["code"] == -32001
    assert error["data"] == {"required": ["mcp:write"], "missing": ["mcp:write"]}


async def test_a_viewer_is_refused_without_a_challenge_a_new_consent_could_not_meet(server, read_only_token):
    response = await _set_name_standalone(server, read_only_token("viewer"))
    assert response.status_code == 200
    assert "www-authenticate" not in response.headers
    assert response.json()["error"]["code"] == -32001


async def test_inside_a_session_the_refusal_stays_in_json_rpc(server, read_only_token):
    """A session keeps the scopes it opened with: a new token would not help, so no challenge."""
    raw = RawMcp(read_only_token("admin"))
    try:
        session_id = await raw.initialize(server.mcp_url)
        response = await raw.request(server.mcp_url, "tools/call", SET_NAME, session_id=session_id)
    finally:
        await raw.aclose()
    assert response.status_code == 200
    assert "www-authenticate" not in response.headers
    assert response.json()["error"]["code"] == -32001


async def test_the_sdk_client_steps_up_through_the_browser_and_the_call_succeeds(
    server, committed, own_admin
):
    """An admin's client holds a read-only token; the write call sends them through consent again."""
    application = committed(ApplicationFactory)
    narrow = committed(
        AccessTokenFactory,
        scope="mcp:read",
        membership=own_admin,
        application=application,
        resource=[server.mcp_url],
    )
    storage = MemoryTokenStorage(
        tokens=OAuthToken(access_token=narrow.token, token_type="Bearer", scope="mcp:read")
    )
    admin = person_of(own_admin)
    async with sdk_client(server, admin, storage=storage, mode="2026-07-28") as (client, _):
        result = await client.call_tool("set_display_name", {"display_name": "Alice Stepped"})
    assert not result.is_error, result
    assert admin.logins == 1, "the step-up went through the browser once"
    assert storage.tokens is not None
    assert set((storage.tokens.scope or "").split()) == {"mcp:read", "mcp:write"}

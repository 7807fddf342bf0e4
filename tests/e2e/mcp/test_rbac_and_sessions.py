"""Roles decide what a token can do; sessions belong to whoever opened them."""

from __future__ import annotations

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from accounts.models import User
from tests.e2e.conftest import person_of
from tests.e2e.harness import ACME_VIEWER_SCOPE, ACME_VIEWER_TOOLS, Person, sdk_client
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body

pytestmark = pytest.mark.django_db


@pytest.fixture
async def display_name():
    """Give a person a display name for one test (one a refused write would change), and put the
    old one back after it."""
    old: dict[str, str] = {}

    async def give(username: str, name: str) -> None:
        user = await User.objects.aget(username=username)
        old.setdefault(username, user.display_name)
        await User.objects.filter(pk=user.pk).aupdate(display_name=name)

    yield give
    for username, name in old.items():
        await User.objects.filter(username=username).aupdate(display_name=name)


async def test_a_viewer_sees_only_read_tools_and_cannot_call_a_write_tool(server, display_name):
    await display_name("bob", "Bob Before")
    bob = Person("bob")
    async with sdk_client(server, bob) as (client, storage):
        tools = await client.list_tools()
        # Read tools only: who they are, their own data agent preferences, and the workflow tools
        # (each command is checked against the scopes of what it runs).
        assert [tool.name for tool in tools.tools] == ACME_VIEWER_TOOLS
        assert storage.tokens is not None
        assert storage.tokens.scope == ACME_VIEWER_SCOPE

        with pytest.raises(MCPError) as refusal:
            await client.call_tool("set_display_name", {"display_name": "Bobby"})

        whoami = await client.call_tool("whoami", {})

    assert refusal.value.code == -32001
    assert refusal.value.data == {"required": ["mcp:write"], "missing": ["mcp:write"]}
    assert "mcp:write" in refusal.value.message
    assert whoami.structured_content["role"] == "viewer"
    assert (await User.objects.aget(username="bob")).display_name == "Bob Before"


async def test_an_admin_can_call_a_write_tool(server, committed, own_admin):
    async with minted_sdk_client(committed, server, person_of(own_admin)) as (client, _):
        result = await client.call_tool("set_display_name", {"display_name": "  Alice A.  "})
    assert result.is_error is False
    assert result.structured_content == {"display_name": "Alice A."}
    assert (await User.objects.aget(pk=own_admin.user.pk)).display_name == "Alice A."


async def test_a_write_tool_rejects_a_blank_display_name_before_running(server, committed, display_name):
    await display_name("alice", "Alice Before")
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("set_display_name", {"display_name": "   "})
    assert refusal.value.code == -32602
    # A blank name that got through would be stored stripped, as "": never "   ".
    assert (await User.objects.aget(username="alice")).display_name == "Alice Before"


async def test_a_session_id_used_with_another_user_s_token_is_not_found(server, committed):
    alice = minted_token(committed, server, Person("alice"))
    carol = minted_token(committed, server, Person("carol"))
    async with httpx.AsyncClient(timeout=10) as http:
        opened = await http.post(
            server.mcp_url,
            json=initialize_body(),
            headers={**MCP_HEADERS, "authorization": f"Bearer {alice}"},
        )
        assert opened.status_code == 200
        session_id = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        headers = {**MCP_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}

        hijack = await http.post(
            server.mcp_url,
            json=listing,
            headers={**headers, "authorization": f"Bearer {carol}"},
        )
        own = await http.post(
            server.mcp_url,
            json=listing,
            headers={**headers, "authorization": f"Bearer {alice}"},
        )
    assert hijack.status_code == 404
    assert own.status_code == 200

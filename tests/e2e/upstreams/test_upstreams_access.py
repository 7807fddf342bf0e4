"""Who sees an upstream: its scopes decide, as a local tool's do (a viewer neither sees nor calls
an upstream restricted to writers), and another tenant's upstream is neither listed nor callable."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from core.errors import INSUFFICIENT_SCOPE
from tests.e2e.harness import ACME_ADMIN_TOOLS, ACME_VIEWER_TOOLS, Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.upstream_fixtures import remote_fields
from tests.support.upstream_support import upstream_row

pytestmark = pytest.mark.django_db

INVALID_PARAMS = -32602
PERMISSION_DENIED = -32001
UPSTREAM_TOOLS = {
    "echo",
    "received_headers",
    "count_to",
    "sleep",
    "ask_name",
    "ask_model",
    "add_tool",
    "flood_list_changed",
    "fail",
}


async def test_an_upstream_for_writers_is_hidden_from_a_viewer_and_refused_by_scope(
    server, committed, http_upstream
):
    committed(
        upstream_row, tenant="acme", name="writers", scopes=["mcp:write"], **remote_fields(http_upstream)
    )

    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        viewer_tools = {tool.name for tool in (await client.list_tools()).tools}
        viewer_prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        viewer_resources = {str(r.uri) for r in (await client.list_resources()).resources}
        with pytest.raises(MCPError) as refused_call:
            await client.call_tool("echo", {"text": "hi"})
        with pytest.raises(MCPError) as refused_prompt:
            await client.get_prompt("greet", {"name": "Bob"})
        with pytest.raises(MCPError) as refused_read:
            await client.read_resource("upstream://notes/readme")
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        writer_tools = {tool.name for tool in (await client.list_tools()).tools}
        echoed = await client.call_tool("echo", {"text": "hi"})

    assert viewer_tools == set(ACME_VIEWER_TOOLS)
    assert "greet" not in viewer_prompts
    assert "upstream://notes/readme" not in viewer_resources
    # As a local tool the caller may not use: refused for its scope, before the upstream is asked.
    for refused in (refused_call, refused_prompt, refused_read):
        assert refused.value.code == PERMISSION_DENIED, refused.value
        assert refused.value.message.startswith(INSUFFICIENT_SCOPE)
        assert "mcp:write" in refused.value.message
    assert writer_tools == ACME_ADMIN_TOOLS | UPSTREAM_TOOLS
    assert echoed.structured_content is not None
    assert echoed.structured_content["text"] == "hi"


async def test_a_viewer_sees_and_calls_an_upstream_open_to_readers(server, committed, http_upstream):
    committed(upstream_row, tenant="acme", name="readers", prefix_tools=True, **remote_fields(http_upstream))

    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        echoed = await client.call_tool("readers_echo", {"text": "hi"})

    assert tools == set(ACME_VIEWER_TOOLS) | {f"readers_{name}" for name in UPSTREAM_TOOLS}
    assert echoed.structured_content is not None
    assert echoed.structured_content["text"] == "hi"


async def test_another_tenant_s_upstream_is_neither_listed_nor_callable(server, committed, http_upstream):
    committed(
        upstream_row, tenant="globex", name="globex-only", prefix_tools=True, **remote_fields(http_upstream)
    )

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        with pytest.raises(MCPError) as refused_call:
            await client.call_tool("globex-only_echo", {"text": "hi"})
        with pytest.raises(MCPError) as refused_prompt:
            await client.get_prompt("globex-only_greet", {"name": "Al"})
        with pytest.raises(MCPError) as refused_read:
            await client.read_resource("upstream://items/1")
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        carol_tools = {tool.name for tool in (await client.list_tools()).tools}

    assert tools == ACME_ADMIN_TOOLS
    assert "globex-only_greet" not in prompts
    assert "upstream://items/{item_id}" not in templates
    for refused in (refused_call, refused_prompt, refused_read):
        assert refused.value.code == INVALID_PARAMS, refused.value
    assert "Unknown tool" in refused_call.value.message
    assert {f"globex-only_{name}" for name in UPSTREAM_TOOLS} <= carol_tools


async def test_a_disabled_upstream_is_neither_listed_nor_callable(server, committed, http_upstream):
    committed(
        upstream_row,
        tenant="acme",
        name="off",
        enabled=False,
        tool_names=["echo"],
        **remote_fields(http_upstream),
    )
    records_before = len(http_upstream.records())

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("echo", {"text": "hi"})

    assert tools == ACME_ADMIN_TOOLS
    assert refused.value.code == INVALID_PARAMS
    assert "Unknown tool" in refused.value.message
    assert len(http_upstream.records()) == records_before


async def test_the_upstreams_toolset_turned_off_for_a_tenant_hides_all_its_upstreams(
    server, committed, tenant_toolset, http_upstream
):
    committed(upstream_row, tenant="acme", name="all-off", prefix_tools=True, **remote_fields(http_upstream))
    tenant_toolset("acme", "upstreams", enabled=False)

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("all-off_echo", {"text": "hi"})

    assert tools == ACME_ADMIN_TOOLS
    assert refused.value.code == INVALID_PARAMS


async def test_hostile_names_are_unknown_tools_prompts_and_resources(server, committed, http_upstream):
    committed(upstream_row, tenant="acme", name="ext", prefix_tools=True, **remote_fields(http_upstream))
    names = ["ext_echo\x00", "ext_" + "e" * 100_000, "ext_ech\u00f6", "../ext_echo", "EXT_ECHO"]

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        refusals = []
        for name in names:
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {"text": "hi"})
            refusals.append(refused.value)
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name.replace("echo", "greet"), {"name": "x"})
            refusals.append(refused.value)
        with pytest.raises(MCPError) as unknown_uri:
            await client.read_resource("upstream://elsewhere/\x00")

    for error in refusals:
        assert error.code == INVALID_PARAMS, error
    assert unknown_uri.value.code == INVALID_PARAMS, unknown_uri.value

"""An upstream's tools, resources, resource templates and prompts appear in the tenant's lists beside
Gatehouse's own, as the upstream publishes them (names prefixed when asked, the tool selection
applied), and reads and prompts are forwarded, over Streamable HTTP, SSE and stdio alike."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent, TextResourceContents, Tool

from tests.e2e.harness import ACME_ADMIN_TOOLS, Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.upstream_fixtures import stdio_fields
from tests.support.upstream_support import UpstreamProcess, upstream_row

pytestmark = pytest.mark.django_db


async def _published_directly(process: UpstreamProcess) -> dict[str, Tool]:
    """The tools as the upstream publishes them to a client of its own."""
    async with Client(process.url) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


def _same_as_published(tool: Tool, original: Tool) -> None:
    assert tool.description == original.description
    assert tool.input_schema == original.input_schema
    assert tool.output_schema == original.output_schema


async def test_the_upstream_s_tools_are_listed_beside_gatehouse_s_own_with_its_prefix(
    server, committed, upstream_fields: dict[str, Any], http_upstream
):
    committed(
        upstream_row, tenant="acme", name="ext", prefix_tools=True, exclude_tools=["fail"], **upstream_fields
    )
    published = await _published_directly(http_upstream)

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert set(tools) == ACME_ADMIN_TOOLS | {f"ext_{name}" for name in published if name != "fail"}
    for name, original in published.items():
        if name != "fail":
            _same_as_published(tools[f"ext_{name}"], original)


async def test_without_a_prefix_only_the_included_tools_are_listed_under_their_own_names(
    server, committed, upstream_fields: dict[str, Any], http_upstream
):
    committed(upstream_row, tenant="acme", name="ext", include_tools=["echo", "count_to"], **upstream_fields)
    published = await _published_directly(http_upstream)

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert set(tools) == ACME_ADMIN_TOOLS | {"echo", "count_to"}
    _same_as_published(tools["echo"], published["echo"])
    _same_as_published(tools["count_to"], published["count_to"])


async def test_an_excluded_tool_wins_over_its_inclusion_and_cannot_be_called(
    server, committed, http_upstream
):
    committed(
        upstream_row,
        tenant="acme",
        name="ext",
        url=http_upstream.url,
        include_tools=["echo", "fail"],
        exclude_tools=["fail"],
    )
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        names = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("fail", {})
        with pytest.raises(MCPError) as unlisted:
            await client.call_tool("sleep", {"seconds": 0})

    assert names == ACME_ADMIN_TOOLS | {"echo"}
    for error in (refused.value, unlisted.value):
        assert error.code == -32602, error
        assert "Unknown tool" in str(error)


async def test_the_upstream_s_resources_templates_and_prompts_are_listed_read_and_got(
    server, committed, upstream_fields: dict[str, Any]
):
    committed(upstream_row, tenant="acme", name="ext", prefix_tools=True, **upstream_fields)

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        templates = {t.uri_template: t for t in (await client.list_resource_templates()).resource_templates}
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        note = await client.read_resource("upstream://notes/readme")
        item = await client.read_resource("upstream://items/42")
        prompt = await client.get_prompt("ext_greet", {"name": "Ann"})

    assert resources["upstream://notes/readme"].description == "A note."
    assert templates["upstream://items/{item_id}"].description == "An item by id."
    assert prompts["ext_greet"].description == "A greeting prompt."
    assert [a.name for a in prompts["ext_greet"].arguments or []] == ["name"]
    assert [_text(c) for c in note.contents] == ["upstream readme"]
    assert [_text(c) for c in item.contents] == ["item 42"]
    (message,) = prompt.messages
    assert isinstance(message.content, TextContent)
    assert message.content.text == "Please greet Ann."


def _text(contents: Any) -> str:
    assert isinstance(contents, TextResourceContents), contents
    return contents.text


async def test_the_upstream_s_list_changed_drops_gatehouse_s_copy_of_its_list(server, committed):
    # stdio: the tool is added in this row's own child, which no other test shares.
    committed(upstream_row, tenant="acme", name="growing", prefix_tools=True, **stdio_fields())

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        before = {tool.name for tool in (await client.list_tools()).tools}
        added = await client.call_tool("growing_add_tool", {"name": "newcomer"})
        after = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
        called = await client.call_tool("growing_newcomer", {})

    assert "growing_newcomer" not in before
    assert not added.is_error, added
    # Well within the list cache's 30 s: the upstream's notification, not the time, refreshed it.
    assert after == before | {"growing_newcomer"}
    assert not called.is_error, called


async def test_names_outside_the_set_or_looking_like_another_are_left_out_and_cannot_be_called(
    server, committed
):
    """Shown failing before: the Cyrillic ``wh\u043eami``, ``wh0ami``, a name with a zero-width
    space and ``Fine-tool`` were all listed beside ``whoami`` and ``fine_tool``, and called."""
    lookalikes = ["wh\u043eami", "wh0ami", "who\u200bami", "fine_tool"]
    fields = stdio_fields()
    extra = [arg for name in lookalikes for arg in ("--extra-tool", name)]
    committed(
        upstream_row,
        tenant="acme",
        name="lookalike",
        include_tools=lookalikes,
        **{**fields, "args": [*fields["args"], *extra]},
    )
    # Listed after "lookalike" (by name): its Fine-tool looks like fine_tool.
    committed(
        upstream_row,
        tenant="acme",
        name="mimic",
        include_tools=["Fine-tool"],
        **{**fields, "args": [*fields["args"], "--extra-tool", "Fine-tool"]},
    )
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        names = {tool.name for tool in (await client.list_tools()).tools}
        refusals = []
        for name in ("wh\u043eami", "wh0ami", "who\u200bami", "Fine-tool"):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {})
            refusals.append(refused.value)
        fine = await client.call_tool("fine_tool", {})

    assert names == ACME_ADMIN_TOOLS | {"fine_tool"}
    for error in refusals:
        assert error.code == -32602, error
        assert "Unknown tool" in str(error)
    assert not fine.is_error, fine

"""An upstream that dies, or was never there, fails the calls that need it with -32005 naming it,
and nothing else: Gatehouse's own tools go on working in the same session, the lists still answer,
and the first call after the upstream is back (restarted on its port, or a new stdio child) works."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.harness import ACME_ADMIN_TOOLS, Person, free_port
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.upstream_fixtures import UpstreamUnderTest, stdio_fields
from tests.support.upstream_support import UpstreamProcess, process_reaped, upstream_row

pytestmark = pytest.mark.django_db

UPSTREAM_UNAVAILABLE = -32005
RECORD_DEADLINE_SECONDS = 30
# A safety net only: a dead upstream is noticed by its closed connection well before this.
CALL_TIMEOUT_SECONDS = 45


def _assert_unavailable(error: MCPError, name: str) -> None:
    assert error.code == UPSTREAM_UNAVAILABLE, error
    assert f"The upstream MCP server {name!r} is unavailable" in error.message
    assert isinstance(error.data, dict)
    assert error.data.get("upstream") == name, error.data


async def _until(condition, *, deadline: float = RECORD_DEADLINE_SECONDS) -> None:
    give_up = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < give_up, "the upstream did not record it"
        await asyncio.sleep(0.05)


def _started(records: list[dict]) -> int:
    return sum(record.get("tool") == "sleep" and bool(record.get("started")) for record in records)


async def test_an_http_upstream_killed_mid_call_gives_32005_and_works_again_after_its_restart(
    server, committed, tmp_path: Path
):
    process = UpstreamProcess("http", workdir=tmp_path).start()
    try:
        committed(
            upstream_row,
            tenant="acme",
            name="doomed",
            url=process.url,
            prefix_tools=True,
            call_timeout_seconds=CALL_TIMEOUT_SECONDS,
        )
        async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
            call = asyncio.ensure_future(client.call_tool("doomed_sleep", {"seconds": 600}))
            await _until(lambda: _started(process.records()) == 1)
            process.kill()
            with pytest.raises(MCPError) as killed:
                await call
            own = await client.call_tool("whoami", {})
            with pytest.raises(MCPError) as while_down:
                await client.call_tool("doomed_echo", {"text": "anyone?"})
            process = UpstreamProcess("http", workdir=tmp_path, port=process.port).start()
            back = await client.call_tool("doomed_echo", {"text": "back"})
    finally:
        process.kill()

    _assert_unavailable(killed.value, "doomed")
    # Shown failing before: "it answered error -32000: Connection closed", which it never said.
    assert "-32000" not in killed.value.message
    _assert_unavailable(while_down.value, "doomed")
    assert not own.is_error, own
    assert back.structured_content is not None
    assert back.structured_content["text"] == "back"


async def test_a_stdio_child_killed_mid_call_gives_32005_and_the_next_call_starts_a_new_one(
    server, committed, tmp_path: Path
):
    upstream = UpstreamUnderTest(stdio_fields(record=tmp_path / "stdio.jsonl"), tmp_path / "stdio.jsonl")
    committed(
        upstream_row,
        tenant="acme",
        name="child",
        call_timeout_seconds=CALL_TIMEOUT_SECONDS,
        **upstream.fields,
    )
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        first = await client.call_tool("echo", {"text": "who runs me?"})
        assert first.structured_content is not None
        child = int(first.structured_content["pid"])
        call = asyncio.ensure_future(client.call_tool("sleep", {"seconds": 600}))
        await _until(lambda: _started(upstream.records()) == 1)
        os.kill(child, signal.SIGKILL)
        with pytest.raises(MCPError) as killed:
            await call
        own = await client.call_tool("whoami", {})
        again = await client.call_tool("echo", {"text": "again"})

    _assert_unavailable(killed.value, "child")
    assert "its connection closed before it answered" in killed.value.message, killed.value.message
    assert not own.is_error, own
    assert again.structured_content is not None
    assert again.structured_content["text"] == "again"
    assert again.structured_content["pid"] != child


async def test_an_upstream_where_nothing_listens_leaves_the_lists_and_fails_its_known_tools_by_name(
    server, committed
):
    committed(
        upstream_row,
        tenant="acme",
        name="nowhere",
        url=f"http://127.0.0.1:{free_port()}/mcp",
        connect_timeout_seconds=5,
        prefix_tools=True,
        # As its last test found them: the names Gatehouse's clients use.
        tool_names=["nowhere_echo"],
    )
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        prompts = await client.list_prompts()
        with pytest.raises(MCPError) as refused:
            await client.call_tool("nowhere_echo", {"text": "hello?"})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nowhere_never_published", {})
        own = await client.call_tool("whoami", {})

    assert tools == ACME_ADMIN_TOOLS
    assert not [p for p in prompts.prompts if p.name == "greet"]
    _assert_unavailable(refused.value, "nowhere")
    assert "could not be reached" in refused.value.message
    assert unknown.value.code == -32602
    assert not own.is_error, own


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_an_upstream_restarted_between_calls_is_reconnected_to_without_an_error(
    server, committed, tmp_path: Path, transport: str
):
    process = UpstreamProcess(transport, workdir=tmp_path).start()
    try:
        committed(upstream_row, tenant="acme", name="restarted", transport=transport, url=process.url)
        async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
            before = await client.call_tool("echo", {"text": "before"})
            # Gatehouse's pooled session now belongs to a process that is gone.
            process.kill()
            process = UpstreamProcess(transport, workdir=tmp_path, port=process.port).start()
            after = await client.call_tool("echo", {"text": "after"})
    finally:
        process.kill()

    assert before.structured_content is not None
    assert after.structured_content is not None
    assert after.structured_content["text"] == "after"
    assert after.structured_content["pid"] != before.structured_content["pid"]


async def test_a_stdio_child_that_died_between_calls_is_replaced_without_an_error(
    server, committed, tmp_path: Path
):
    committed(upstream_row, tenant="acme", name="child", **stdio_fields())
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        before = await client.call_tool("echo", {"text": "before"})
        assert before.structured_content is not None
        child = int(before.structured_content["pid"])
        os.kill(child, signal.SIGKILL)
        # Reaped, not merely a zombie: then every thread of it is gone and its pipes are closed.
        await _until(lambda: process_reaped(child))
        after = await client.call_tool("echo", {"text": "after"})

    assert after.structured_content is not None
    assert after.structured_content["text"] == "after"
    assert after.structured_content["pid"] != child


async def test_an_upstream_slower_than_its_call_timeout_gives_32005_and_is_told_to_stop(
    server, committed, tmp_path: Path
):
    record = tmp_path / "slow.jsonl"
    upstream = UpstreamUnderTest(stdio_fields(record=record), record)
    committed(upstream_row, tenant="acme", name="slow", call_timeout_seconds=1, **upstream.fields)

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as timed_out:
            await client.call_tool("sleep", {"seconds": 600})
        own = await client.call_tool("whoami", {})
        await _until(lambda: any(r.get("cancelled") for r in upstream.records()))
        quick = await client.call_tool("echo", {"text": "quick"})

    _assert_unavailable(timed_out.value, "slow")
    assert "no answer within 1 s" in timed_out.value.message
    assert not own.is_error
    assert quick.structured_content is not None
    assert quick.structured_content["text"] == "quick"


async def test_a_url_that_answers_something_other_than_mcp_gives_32005(server, committed):
    committed(
        upstream_row,
        tenant="acme",
        name="garbage",
        url=f"{server.base_url}/.well-known/oauth-authorization-server",
        tool_names=["echo"],
        connect_timeout_seconds=5,
        call_timeout_seconds=10,
    )
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("echo", {"text": "hello?"})

    assert tools == ACME_ADMIN_TOOLS
    _assert_unavailable(refused.value, "garbage")
    # The upstream's URL may carry a key: the caller hears the kind of failure, not where.
    assert "oauth-authorization-server" not in refused.value.message

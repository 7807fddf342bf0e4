"""A call forwarded to an upstream behaves as the upstream's own: its structured result and its
tool errors pass through, its progress notifications and log messages reach the caller, the
caller's cancellation reaches the upstream, and the upstream's elicitation reaches the caller and
its answer the upstream; arguments the published schema refuses never leave Gatehouse."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    LoggingMessageNotificationParams,
    TextContent,
)

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import RawMcp, sse_messages
from tests.e2e.upstream_fixtures import UpstreamUnderTest, remote_fields
from tests.support.upstream_support import upstream_row
from upstreams.downstream import NO_ELICITATION

pytestmark = pytest.mark.django_db

INVALID_PARAMS = -32602
UPSTREAM_UNAVAILABLE = -32005
# How long a test waits for the upstream to write down what reached it (well beyond need).
RECORD_DEADLINE_SECONDS = 30


async def test_a_structured_result_and_a_tool_error_pass_through(
    server, committed, upstream: UpstreamUnderTest
):
    committed(upstream_row, tenant="acme", name="ext", prefix_tools=True, **upstream.fields)

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        echoed = await client.call_tool("ext_echo", {"text": "hé ✓"})
        failed = await client.call_tool("ext_fail", {})

    assert not echoed.is_error, echoed
    assert echoed.structured_content is not None
    assert echoed.structured_content["text"] == "hé ✓"
    assert isinstance(echoed.structured_content["pid"], int)
    assert failed.is_error is True
    # What the upstream says of its own failure (its SDK hides the exception's message).
    assert _text(failed.content) == "Error executing tool fail"


async def test_arguments_the_published_schema_refuses_never_reach_the_upstream(
    server, committed, upstream: UpstreamUnderTest
):
    committed(upstream_row, tenant="acme", name="ext", **upstream.fields)
    hostile: list[dict[str, Any]] = [{"text": 5}, {}, {"text": ["x" * 100_000]}, {"text": _nested(20)}]

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        await client.call_tool("echo", {"text": "counted"})
        before = _echo_calls(upstream)
        refusals = []
        for arguments in hostile:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("echo", arguments)
            refusals.append(refused.value)
        after = await client.call_tool("echo", {"text": "nul \x00 byte"})

    for error in refusals:
        assert error.code == INVALID_PARAMS, error
        assert "Invalid arguments for echo" in error.message
    # Only the last call, whose text is a string however odd, reached the upstream.
    assert after.structured_content is not None
    assert after.structured_content["text"] == "nul \x00 byte"
    assert _echo_calls(upstream) == before + 1


@pytest.mark.parametrize("protocol", ["handshake", "auto"])
async def test_progress_and_log_messages_of_a_forwarded_call_reach_the_caller(
    server, committed, upstream: UpstreamUnderTest, protocol: str
):
    # "auto": the server speaks 2026-07-28 too, so the call goes without a session, and its log
    # messages come only because Gatehouse asks for them in the request.
    fields = {**upstream.fields, "protocol": protocol}
    committed(upstream_row, tenant="acme", name="ext", prefix_tools=True, **fields)
    reported: list[tuple[float, float | None, str | None]] = []
    logs: list[LoggingMessageNotificationParams] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, total, message))

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with minted_sdk_client(committed, server, Person("alice"), logging_callback=on_log) as (client, _):
        result = await client.call_tool("ext_count_to", {"n": 3}, progress_callback=on_progress)

    assert _text(result.content) == "counted to 3"
    assert reported == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert [(log.level, log.data) for log in logs] == [("info", f"counted {i}") for i in (1, 2, 3)]


async def test_a_lone_surrogate_in_the_arguments_is_refused_before_the_upstream(
    server, committed, http_upstream
):
    committed(upstream_row, tenant="acme", name="ext", url=http_upstream.url)
    before = sum(record.get("tool") == "echo" for record in http_upstream.records())
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "\ud800"}},
        }
        # json.dumps escapes it as \ud800: valid JSON, but no valid Unicode.
        response = await raw.http.post(
            server.mcp_url, content=json.dumps(body).encode(), headers=raw.headers(session_id)
        )
    finally:
        await raw.aclose()

    (error,) = [m["error"] for m in sse_messages(response) if "error" in m]
    assert error["code"] == INVALID_PARAMS
    assert sum(record.get("tool") == "echo" for record in http_upstream.records()) == before


# The SDK warns that logging/setLevel is deprecated from protocol 2026-07-28; Gatehouse still honours it.
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_the_upstream_s_log_messages_honour_the_caller_s_log_level(server, committed, http_upstream):
    committed(upstream_row, tenant="acme", name="ext", url=http_upstream.url)
    logs: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with minted_sdk_client(committed, server, Person("alice"), logging_callback=on_log) as (client, _):
        await client.set_logging_level("warning")
        quiet = await client.call_tool("count_to", {"n": 2})
        await client.set_logging_level("debug")
        told = await client.call_tool("count_to", {"n": 2})

    assert not quiet.is_error
    assert not told.is_error
    assert [log.data for log in logs] == ["counted 1", "counted 2"]


async def test_a_call_the_caller_cancels_is_cancelled_at_the_upstream(
    server, committed, upstream: UpstreamUnderTest
):
    """Raw MCP: the SDK client's OAuth provider holds its lock until a response's headers arrive, and
    a silent forwarded call's arrive with its first event, so the SDK client's own courtesy cancel
    would wait that long."""
    committed(upstream_row, tenant="acme", name="ext", prefix_tools=True, **upstream.fields)
    started_before = _count(upstream, "started")
    cancelled_before = _count(upstream, "cancelled")
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        call = asyncio.ensure_future(
            raw.request(
                server.mcp_url,
                "tools/call",
                {"name": "ext_sleep", "arguments": {"seconds": 600}},
                session_id=session_id,
            )
        )
        await _until(lambda: _count(upstream, "started") > started_before)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": raw.next_id}}
        posted = await raw.http.post(server.mcp_url, json=cancel, headers=raw.headers(session_id))
        assert posted.status_code == 202, posted.text
        await _until(lambda: _count(upstream, "cancelled") > cancelled_before)
        # The cancelled call's stream ends without an answer, and the session goes on.
        async with asyncio.timeout(RECORD_DEADLINE_SECONDS):
            ended = await call
        after = await raw.result(
            server.mcp_url,
            "tools/call",
            {"name": "ext_echo", "arguments": {"text": "still here"}},
            session_id=session_id,
        )
    finally:
        await raw.aclose()

    assert not [m for m in sse_messages(ended) if "result" in m], ended.text
    assert after["structuredContent"]["text"] == "still here"


async def test_the_upstream_s_elicitation_reaches_the_caller_and_its_answer_the_upstream(
    server, committed, upstream: UpstreamUnderTest
):
    committed(upstream_row, tenant="acme", name="ext", **upstream.fields)
    asked: list[str] = []

    async def answer(context, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ann"})

    async with minted_sdk_client(committed, server, Person("alice"), elicitation_callback=answer) as (
        client,
        _,
    ):
        result = await client.call_tool("ask_name", {})

    assert asked == ["What is your name?"]
    assert not result.is_error, result
    assert _text(result.content) == "hello Ann"


async def test_the_upstream_s_sampling_request_reaches_the_caller_s_model_and_its_answer_the_upstream(
    server, committed, upstream: UpstreamUnderTest
):
    committed(upstream_row, tenant="acme", name="ext", **upstream.fields)
    asked: list[str] = []

    async def answer(context, params: CreateMessageRequestParams) -> CreateMessageResult:
        (message,) = params.messages
        assert isinstance(message.content, TextContent)
        asked.append(message.content.text)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="forty-two"), model="test-model"
        )

    async with minted_sdk_client(committed, server, Person("alice"), sampling_callback=answer) as (client, _):
        result = await client.call_tool("ask_model", {"prompt": "The answer?"})

    assert asked == ["The answer?"]
    assert not result.is_error, result
    assert _text(result.content) == "model says: forty-two"


async def test_two_callers_at_once_each_get_only_their_own_progress(server, committed, http_upstream):
    committed(upstream_row, tenant="acme", name="ext", url=http_upstream.url)
    reported: dict[str, list[float]] = {"alice": [], "bob": []}

    async def count(person: str, n: int) -> str:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reported[person].append(progress)

        async with minted_sdk_client(committed, server, Person(person)) as (client, _):
            result = await client.call_tool("count_to", {"n": n}, progress_callback=on_progress)
        return _text(result.content)

    results = await asyncio.gather(count("alice", 3), count("bob", 5))

    assert results == ["counted to 3", "counted to 5"]
    assert reported == {"alice": [1, 2, 3], "bob": [1, 2, 3, 4, 5]}


async def test_a_caller_without_elicitation_gets_an_error_naming_the_upstream_and_why(
    server, committed, http_upstream
):
    committed(upstream_row, tenant="acme", name="ext", **remote_fields(http_upstream))

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refused:
            await client.call_tool("ask_name", {})

    # The upstream hears that the client offers no elicitation, and its tool fails with that error.
    assert refused.value.code == UPSTREAM_UNAVAILABLE
    assert "'ext'" in refused.value.message
    assert NO_ELICITATION in refused.value.message


def _text(content: list) -> str:
    (block,) = content
    assert isinstance(block, TextContent), block
    return block.text


def _nested(depth: int) -> object:
    value: object = "deep"
    for _ in range(depth):
        value = {"a": value}
    return value


def _echo_calls(upstream: UpstreamUnderTest) -> int:
    return sum(record.get("tool") == "echo" for record in upstream.records())


def _count(upstream: UpstreamUnderTest, what: str) -> int:
    return sum(record.get("tool") == "sleep" and bool(record.get(what)) for record in upstream.records())


async def _until(condition, *, deadline: float = RECORD_DEADLINE_SECONDS) -> None:
    give_up = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < give_up, "the upstream did not record it"
        await asyncio.sleep(0.05)

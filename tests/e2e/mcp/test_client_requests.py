"""A tool asks the client mid-call (sampling, elicitation), and the client may cancel a call:
the answer or the cancellation reaches the right call whichever worker the balancer picks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from mcp_types import (
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    TextContent,
)

from mcp_gateway.models import RelayedMessage
from tests.e2e.harness import Person, RoundRobin
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import RawMcp

pytestmark = pytest.mark.django_db


async def _answer_elicitation(context, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"username": "alice", "email": "alice@acme.test"})


async def _answer_sampling(context, params: CreateMessageRequestParams) -> CreateMessageResult:
    (message,) = params.messages
    assert isinstance(message.content, TextContent)
    return CreateMessageResult(
        role="assistant",
        content=TextContent(type="text", text=f"echo: {message.content.text}"),
        model="test-model",
    )


async def test_the_sdk_client_answers_elicitation_and_sampling_behind_a_balancer(
    server, second_server, committed, tenant_toolset
):
    tenant_toolset("acme", "conformance", enabled=True)
    balancer = RoundRobin([server.port, second_server.port])
    async with minted_sdk_client(
        committed,
        server,
        Person("alice"),
        transport=balancer,
        elicitation_callback=_answer_elicitation,
        sampling_callback=_answer_sampling,
    ) as (client, _):
        elicited = [await client.call_tool("test_elicitation", {"message": "Who are you?"}) for _ in range(3)]
        sampled = [await client.call_tool("test_sampling", {"prompt": "Say hi"}) for _ in range(3)]

    for result in elicited:
        assert not result.is_error, result
        assert _text(result).startswith("User response: action=accept")
        assert "alice@acme.test" in _text(result)
    for result in sampled:
        assert not result.is_error, result
        assert _text(result) == "LLM response: echo: Say hi"
    assert set(balancer.served) == {server.port, second_server.port}


def _text(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


ELICIT = {"name": "test_elicitation", "arguments": {"message": "Hello?"}}


async def _ask(raw: RawMcp, url: str, session_id: str, answer: Callable[[dict], Awaitable[None]]) -> dict:
    """Call ``test_elicitation`` on ``url``, let ``answer`` reply to the server's request, and
    return the call's final message."""
    raw.next_id += 1
    body = {"jsonrpc": "2.0", "id": raw.next_id, "method": "tools/call", "params": ELICIT}
    async with raw.http.stream("POST", url, json=body, headers=raw.headers(session_id)) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        messages = (json.loads(line[5:]) async for line in stream.aiter_lines() if line.startswith("data:"))
        request = await anext(messages)
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Hello?"
        await answer(request)
        final = [message async for message in messages]
    assert final[-1]["id"] == body["id"]
    return final[-1]


def _accept(request: dict, **content: str) -> dict:
    return {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": content}}


def _answer_on(raw: RawMcp, url: str, session_id: str, **content: str) -> Callable[[dict], Awaitable[None]]:
    """Accept the server's question with ``content``, posting the answer to ``url``."""

    async def answer(request: dict) -> None:
        posted = await raw.http.post(url, json=_accept(request, **content), headers=raw.headers(session_id))
        assert posted.status_code == 202

    return answer


async def test_the_answer_may_reach_another_worker(server, second_server, committed, tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url, capabilities={"elicitation": {}})

        answer = _answer_on(raw, second_server.mcp_url, session_id, username="bea", email="bea@acme.test")
        final = await _ask(raw, server.mcp_url, session_id, answer)
    finally:
        await raw.aclose()
    assert "bea@acme.test" in final["result"]["content"][0]["text"]


async def test_a_large_answer_crosses_workers(server, second_server, committed, tenant_toolset):
    """Answers beyond PostgreSQL's notification size travel through a row."""
    tenant_toolset("acme", "conformance", enabled=True)
    big = "x" * 20_000
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url, capabilities={"elicitation": {}})

        answer = _answer_on(raw, second_server.mcp_url, session_id, username=big, email="e@acme.test")
        final = await _ask(raw, server.mcp_url, session_id, answer)
    finally:
        await raw.aclose()
    assert big in final["result"]["content"][0]["text"]
    assert not await RelayedMessage.objects.aexists()


async def test_a_client_without_elicitation_gets_a_clear_tool_error(server, committed, tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        result = await raw.result(server.mcp_url, "tools/call", ELICIT, session_id=session_id)
    finally:
        await raw.aclose()
    assert result["isError"] is True
    assert "does not offer elicitation" in result["content"][0]["text"]


async def test_only_the_session_that_was_asked_can_answer(server, second_server, committed, tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        asked = await raw.initialize(server.mcp_url, capabilities={"elicitation": {}})
        other = await raw.initialize(server.mcp_url, capabilities={"elicitation": {}})

        async def forge_then_answer(request: dict) -> None:
            for url, session_id, name in [
                (server.mcp_url, other, "forged-here"),
                (second_server.mcp_url, other, "forged-there"),
                (second_server.mcp_url, asked, "genuine"),
            ]:
                posted = await raw.http.post(
                    url, json=_accept(request, username=name, email="x"), headers=raw.headers(session_id)
                )
                assert posted.status_code == 202

        final = await _ask(raw, server.mcp_url, asked, forge_then_answer)
    finally:
        await raw.aclose()
    assert "'username': 'genuine'" in final["result"]["content"][0]["text"]


async def test_a_cancelled_call_stops_on_whichever_worker_runs_it(
    faults_server, second_faults_server, committed
):
    raw = RawMcp(minted_token(committed, faults_server, Person("alice")))
    try:
        session_id = await raw.initialize(faults_server.mcp_url)
        raw.next_id += 1
        call = {
            "jsonrpc": "2.0",
            "id": raw.next_id,
            "method": "tools/call",
            "params": {"name": "wait_for_cancel", "arguments": {}, "_meta": {"progressToken": "started"}},
        }
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call["id"]}}
        headers = raw.headers(session_id)
        async with raw.http.stream("POST", faults_server.mcp_url, json=call, headers=headers) as stream:
            assert stream.status_code == 200
            messages = (
                json.loads(line[5:]) async for line in stream.aiter_lines() if line.startswith("data:")
            )
            started = await anext(messages)
            assert started["method"] == "notifications/progress", started
            rest = asyncio.ensure_future(_all(messages))
            cancelled: list[int] = []
            # The worker running the call starts listening for the others' word with its first call,
            # so the first cancel may come before it listens; cancelling again is harmless. The
            # deadline is well short of the tool's 60 s.
            async with asyncio.timeout(30):
                while not rest.done():
                    posted = await raw.http.post(second_faults_server.mcp_url, json=cancel, headers=headers)
                    cancelled.append(posted.status_code)
                    await asyncio.wait({rest}, timeout=2)
            final = rest.result()
    finally:
        await raw.aclose()
    assert set(cancelled) == {202}
    # The protocol sends no response to a cancelled request: the call's response ends empty.
    assert [m for m in final if "id" in m] == []


async def _all(messages: AsyncIterator[dict]) -> list[dict]:
    return [message async for message in messages]

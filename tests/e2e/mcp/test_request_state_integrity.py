"""A ``requestState`` (protocol 2026-07-28's multi-round-trip calls) is honoured only as this server
sealed it, for the person and client it sealed it for: through the official SDK client, a tampered
state, one sealed for someone else, one sealed by another OAuth client of the same person and one
sealed for another tool are all refused with the endpoint's -32602, and the untouched state still
completes the call."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    ElicitRequestParams,
    ElicitResult,
    InputRequiredResult,
    InputResponses,
    ListRootsResult,
    Root,
    TextContent,
)
from pydantic import FileUrl

from core.models import AuditAction, AuditOutcome
from mcp_gateway.pipeline.input_required import INVALID_STATE
from tests.e2e.harness import Person, sdk_client
from tests.e2e.stamping import StampingTransport, audit_events

pytestmark = pytest.mark.django_db

TAMPERED = "test_input_required_result_tampered_state"
CONFIRMED: InputResponses = {"confirm": ElicitResult(action="accept", content={"ok": True})}


@pytest.fixture
async def conformance_on(server, tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)


async def _first_round(client, name: str = TAMPERED) -> InputRequiredResult:
    first = await client.session.call_tool(name, {}, allow_input_required=True)
    assert isinstance(first, InputRequiredResult), first
    assert first.request_state
    return first


async def _refused(client, state: str, name: str = TAMPERED) -> MCPError:
    with pytest.raises(MCPError) as refusal:
        await client.session.call_tool(
            name, {}, input_responses=CONFIRMED, request_state=state, allow_input_required=True
        )
    return refusal.value


async def _confirm(context, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"ok": True})


def _text(result) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def _tamperings(state: str) -> list[str]:
    middle = len(state) // 2
    flipped = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
    return [state + "-TAMPERED", flipped, state[:-4], state.replace("v1.", "v2.", 1)]


async def test_a_tampered_state_is_refused_and_the_untouched_one_completes(server, conformance_on):
    transport = StampingTransport()
    async with sdk_client(
        server, Person("alice"), mode="2026-07-28", elicitation_callback=_confirm, transport=transport
    ) as (client, _):
        first = await _first_round(client)
        assert first.input_requests is not None
        assert set(first.input_requests) == {"confirm"}
        tampered_states = _tamperings(first.request_state or "")
        for tampered in tampered_states:
            refusal = await _refused(client, tampered)
            assert refusal.error.code == -32602, tampered
            assert refusal.error.message == INVALID_STATE
            assert refusal.error.data == {"reason": "invalid_request_state"}
        done = await client.session.call_tool(
            TAMPERED,
            {},
            input_responses=CONFIRMED,
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert not isinstance(done, InputRequiredResult)
    assert _text(done) == "State verified: confirmed=True"
    # Every refusal is on the audit trail, under the person who sent it.
    calls = transport.request_ids("tools/call")
    assert len(calls) == len(tampered_states) + 2
    for request_id in calls[1:-1]:
        [event] = await audit_events(request_id)
        assert (event.action, event.outcome, event.target) == (
            AuditAction.TOOL_CALLED,
            AuditOutcome.ERROR,
            TAMPERED,
        )
        assert event.detail["code"] == -32602
        assert event.username == "alice"


async def test_a_state_sealed_for_another_person_is_refused(server, conformance_on):
    async with sdk_client(server, Person("alice"), mode="2026-07-28", elicitation_callback=_confirm) as (
        alices,
        _,
    ):
        state = (await _first_round(alices)).request_state or ""
    # Bob belongs to acme too and may call the tool: only the person differs.
    async with sdk_client(server, Person("bob"), mode="2026-07-28", elicitation_callback=_confirm) as (
        bobs,
        _,
    ):
        refusal = await _refused(bobs, state)
        assert (await _first_round(bobs)).request_state != state
    assert refusal.error.code == -32602
    assert refusal.error.message == INVALID_STATE


async def test_a_state_sealed_for_another_client_of_the_same_person_is_refused(server, conformance_on):
    async with sdk_client(server, Person("alice"), mode="2026-07-28", elicitation_callback=_confirm) as (
        first_client,
        _,
    ):
        state = (await _first_round(first_client)).request_state or ""
    # A second registration: the same person, another OAuth client.
    async with sdk_client(server, Person("alice"), mode="2026-07-28", elicitation_callback=_confirm) as (
        second_client,
        _,
    ):
        refusal = await _refused(second_client, state)
    assert refusal.error.code == -32602
    assert refusal.error.message == INVALID_STATE


async def test_a_state_sealed_for_another_tool_is_refused(server, conformance_on):
    async with sdk_client(server, Person("alice"), mode="2026-07-28", elicitation_callback=_confirm) as (
        client,
        _,
    ):
        state = (await _first_round(client, "test_input_required_result_request_state")).request_state or ""
        refusal = await _refused(client, state, name=TAMPERED)
    assert refusal.error.code == -32602


async def test_the_sdk_client_answers_round_after_round_with_the_sealed_state(server, conformance_on):
    asked: list[str] = []
    replies: dict[str, dict[str, str | int | float | bool | list[str] | None]] = {
        "Step 1: What is your name?": {"name": "Alice"},
        "Step 2: What is your favorite color?": {"color": "blue"},
        "What context should the prompt use?": {"context": "quarterly sales"},
    }

    async def answer(context, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content=replies[params.message])

    async with sdk_client(server, Person("alice"), mode="2026-07-28", elicitation_callback=answer) as (
        client,
        _,
    ):
        result = await client.call_tool("test_input_required_result_multi_round", {})
        prompt = await client.get_prompt("test_input_required_result_prompt")
    assert asked == list(replies)
    assert _text(result) == "Alice's favorite color is blue."
    assert [m.content.text for m in prompt.messages if isinstance(m.content, TextContent)] == [
        "Use this context: quarterly sales"
    ]


async def test_on_a_handshake_era_session_the_same_tools_ask_mid_call(server, conformance_on):
    # mcp_gateway.pipeline.input_required asks over the session's back-channel there: one call, no state.
    asked: list[str] = []

    async def answer(context, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Alice"})

    async def roots(context) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=FileUrl("file:///work"), name="Work")])

    async with sdk_client(
        server, Person("alice"), elicitation_callback=answer, list_roots_callback=roots
    ) as (client, _):
        assert client.protocol_version == "2025-11-25"
        greeting = await client.call_tool("test_input_required_result_elicitation", {})
        listed = await client.call_tool("test_input_required_result_list_roots", {})
    assert asked == ["What is your name?"]
    assert _text(greeting) == "Hello, Alice!"
    assert _text(listed) == "Client roots: file:///work (Work)"

"""Every error a client can meet has one JSON-RPC code, and internals never leak."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import RawMcp, sse_messages
from tests.toolsets.faults import SECRET_DETAIL

pytestmark = pytest.mark.django_db


@pytest.fixture
async def session(faults_server, committed):
    raw = RawMcp(minted_token(committed, faults_server, Person("alice")))
    session_id = await raw.initialize(faults_server.mcp_url)
    yield raw, session_id
    await raw.aclose()


def _error(response) -> dict:
    (message,) = [m for m in sse_messages(response) if "error" in m]
    return dict(message["error"])


async def test_a_body_that_is_not_json_is_a_parse_error(faults_server, session):
    raw, session_id = session
    response = await raw.http.post(
        faults_server.mcp_url, content=b"{not json", headers=raw.headers(session_id)
    )
    assert _error(response)["code"] == -32700


async def test_a_message_that_is_not_a_request_is_an_invalid_request(faults_server, session):
    raw, session_id = session
    response = await raw.http.post(
        faults_server.mcp_url, json={"jsonrpc": "2.0", "id": 9, "params": {}}, headers=raw.headers(session_id)
    )
    assert _error(response)["code"] == -32600


async def test_an_unknown_method_is_method_not_found(faults_server, session):
    raw, session_id = session
    response = await raw.request(faults_server.mcp_url, "reports/everything", session_id=session_id)
    assert _error(response)["code"] == -32601


async def test_arguments_are_validated_before_any_tool_code_runs(faults_server, session):
    raw, session_id = session
    response = await raw.request(
        faults_server.mcp_url,
        "tools/call",
        {"name": "set_display_name", "arguments": {"display_name": 5, "extra": True}},
        session_id=session_id,
    )
    error = _error(response)
    assert error["code"] == -32602
    assert error["data"]["tool"] == "set_display_name"
    assert any(problem["path"] == "/display_name" for problem in error["data"]["errors"])


async def test_a_blank_display_name_is_refused_at_the_boundary(faults_server, session):
    raw, session_id = session
    response = await raw.request(
        faults_server.mcp_url,
        "tools/call",
        {"name": "set_display_name", "arguments": {"display_name": "   "}},
        session_id=session_id,
    )
    assert _error(response)["code"] == -32602


async def test_an_unknown_tool_is_invalid_params(faults_server, session):
    raw, session_id = session
    response = await raw.request(faults_server.mcp_url, "tools/call", {"name": "nope"}, session_id=session_id)
    error = _error(response)
    assert error["code"] == -32602
    assert "Unknown tool" in error["message"]


@pytest.mark.parametrize(
    ("tool", "code"),
    [
        ("fail_internal", -32603),
        ("fail_not_found", -32002),
        ("fail_not_ready", -32003),
        ("fail_slowly", -32004),
        ("fail_database", -32005),
    ],
)
async def test_each_failure_has_its_code(faults_server, session, tool, code):
    raw, session_id = session
    response = await raw.request(faults_server.mcp_url, "tools/call", {"name": tool}, session_id=session_id)
    error = _error(response)
    assert error["code"] == code
    assert "hunter2" not in response.text
    assert "10.0.0.5" not in response.text


async def test_an_internal_error_is_logged_with_its_stack_trace(faults_server, session):
    raw, session_id = session
    await raw.request(faults_server.mcp_url, "tools/call", {"name": "fail_internal"}, session_id=session_id)
    log = faults_server.log()
    assert "Unexpected error while serving an MCP request" in log
    assert "Traceback" in log
    assert SECRET_DETAIL in log


async def test_progress_notifications_reach_the_sdk_client(faults_server, committed):
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with minted_sdk_client(committed, faults_server, Person("alice")) as (client, _):
        result = await client.call_tool("count_with_progress", {"steps": 3}, progress_callback=on_progress)
    assert result.structured_content == {"result": 3}
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_the_sdk_client_surfaces_the_code_and_data(faults_server, committed):
    async with minted_sdk_client(committed, faults_server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("fail_not_found", {})
    assert refusal.value.code == -32002
    assert refusal.value.message == "No such report in this tenant."


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}',
        b'{"id": 1, "method": "ping"}',
        b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
        b'"hello"',
    ],
)
async def test_anything_but_a_json_rpc_2_message_is_an_invalid_request(faults_server, session, body):
    raw, session_id = session
    response = await raw.http.post(faults_server.mcp_url, content=body, headers=raw.headers(session_id))
    assert response.status_code == 400
    error = _error(response)
    assert error["code"] == -32600
    assert "pydantic" not in response.text


async def test_a_parse_error_needs_no_session(faults_server, session):
    raw, _ = session
    response = await raw.http.post(faults_server.mcp_url, content=b"{oops", headers=raw.headers())
    assert response.status_code == 400
    assert _error(response)["code"] == -32700

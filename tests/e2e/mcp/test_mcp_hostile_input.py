"""Hostile bodies at /mcp get the endpoint's own JSON-RPC errors: never a 500, never HTML, never
a response that is not JSON, and never a log line the size of the request."""

from __future__ import annotations

import json

import httpx
import pytest

from mcp_gateway.models import McpSession
from tests.e2e.raw_mcp import MCP_HEADERS, RawMcp, initialize_body, sse_messages
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
async def raw(server, committed):
    membership = committed(MembershipFactory)
    token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url])
    client = RawMcp(token.token)
    yield client
    await client.aclose()


def _only_message(response: httpx.Response) -> dict:
    assert response.headers["content-type"].split(";")[0] in {"application/json", "text/event-stream"}
    # Strict JSON: NaN, Infinity and friends are not JSON, whatever Python's parser accepts.
    [message] = [
        json.loads(json.dumps(m), parse_constant=_not_json)
        for m in sse_messages(response)
        if "id" in m and ("result" in m or "error" in m)
    ]
    return dict(message)


def _not_json(constant: str) -> None:
    raise AssertionError(f"the response is not JSON: it holds {constant}")


async def _post_raw(raw: RawMcp, server, body: bytes, session_id: str | None = None) -> httpx.Response:
    return await raw.http.post(server.mcp_url, content=body, headers=raw.headers(session_id))


async def test_a_ten_thousand_deep_array_is_a_parse_error(server, raw):
    session_id = await raw.initialize(server.mcp_url)
    response = await _post_raw(raw, server, b"[" * 10_000 + b"]" * 10_000, session_id)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32700


async def test_deep_params_in_a_request_are_a_parse_error_too(server, raw):
    session_id = await raw.initialize(server.mcp_url)
    deep = '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", '
    deep += '"params": {"name": "whoami", "arguments": {"x": '
    body = (deep + "[" * 5_000 + "]" * 5_000 + "}}}").encode()
    response = await _post_raw(raw, server, body, session_id)
    assert response.json()["error"]["code"] == -32700


async def test_a_deep_body_on_the_stateless_protocol_is_a_parse_error(server, raw):
    headers = {**raw.headers(), "mcp-protocol-version": "2026-07-28"}
    response = await raw.http.post(server.mcp_url, content=b"[" * 10_000 + b"]" * 10_000, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32700


@pytest.mark.parametrize(
    "request_id",
    ["NaN", "Infinity", "-Infinity", "1.5", "1.0", "true", "false", "null", '{"a": 1}', "[1]"],
)
async def test_a_request_id_that_is_not_a_string_or_an_integer_is_an_invalid_request(server, raw, request_id):
    session_id = await raw.initialize(server.mcp_url)
    body = f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "ping"}}'.encode()
    response = await _post_raw(raw, server, body, session_id)
    message = _only_message(response)
    assert message["error"]["code"] == -32600, message
    assert message["id"] is None


async def test_nan_or_infinity_anywhere_in_a_body_is_a_parse_error(server, raw):
    session_id = await raw.initialize(server.mcp_url)
    for constant in ("NaN", "Infinity", "-Infinity"):
        body = '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "whoami", '
        body += f'"arguments": {{"x": {constant}}}}}}}'
        response = await _post_raw(raw, server, body.encode(), session_id)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == -32700


async def test_nan_inside_a_string_is_only_text(server, raw):
    session_id = await raw.initialize(server.mcp_url)
    body = b'{"jsonrpc": "2.0", "id": "NaN", "method": "ping", "params": {"_meta": {"note": "Infinity"}}}'
    message = _only_message(await _post_raw(raw, server, body, session_id))
    assert message == {"jsonrpc": "2.0", "id": "NaN", "result": {}}


async def test_string_and_integer_request_ids_are_echoed(server, raw):
    session_id = await raw.initialize(server.mcp_url)
    for request_id in ('"abc"', "7", "-3"):
        body = f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "ping"}}'.encode()
        message = _only_message(await _post_raw(raw, server, body, session_id))
        assert message["id"] == json.loads(request_id)
        assert message["result"] == {}


async def test_an_invalid_log_level_is_invalid_params(server, raw):
    session_id = await raw.initialize(server.mcp_url)
    response = await raw.request(server.mcp_url, "logging/setLevel", {"level": "nope"}, session_id=session_id)
    error = _only_message(response)["error"]
    assert error["code"] == -32602, error
    assert len(error["message"]) < 300


async def test_a_capability_of_the_wrong_type_is_invalid_params_with_a_short_log_line(server, raw):
    marker = "wrong-type-capability-marker"
    body = initialize_body()
    body["params"]["capabilities"] = {"experimental": [marker * 2_000]}
    before = len(server.log())
    response = await raw.http.post(
        server.mcp_url, json=body, headers={**MCP_HEADERS, "authorization": f"Bearer {raw.token}"}
    )
    error = _only_message(response)["error"]
    assert error["code"] == -32602, error
    assert len(error["message"]) < 300
    assert marker not in error["message"]
    written = server.log()[before:]
    assert all(len(line) <= 2048 for line in written.splitlines()), max(map(len, written.splitlines()))


async def _initialize_with(raw: RawMcp, server, params: dict) -> dict:
    body = initialize_body()
    body["params"].update(params)
    # json.dumps escapes a lone surrogate as \\ud800, as a hostile client would send it.
    response = await raw.http.post(
        server.mcp_url,
        content=json.dumps(body).encode(),
        headers={**MCP_HEADERS, "authorization": f"Bearer {raw.token}"},
    )
    assert "mcp-session-id" not in response.headers
    return _only_message(response)


async def test_initialize_refuses_capabilities_larger_than_the_limit(server, raw):
    sessions = await McpSession.objects.acount()
    message = await _initialize_with(
        raw, server, {"capabilities": {"experimental": {"blob": {"data": "x" * 20_000}}}}
    )
    error = message["error"]
    assert error["code"] == -32602, error
    assert "capabilities" in error["message"]
    assert "16384" in error["message"]
    assert await McpSession.objects.acount() == sessions


async def test_initialize_refuses_client_info_larger_than_the_limit(server, raw):
    message = await _initialize_with(
        raw, server, {"clientInfo": {"name": "big", "version": "1", "title": "t" * 20_000}}
    )
    error = message["error"]
    assert error["code"] == -32602, error
    assert "clientInfo" in error["message"]


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"clientInfo": {"name": "nul\u0000name", "version": "1"}}, "NUL"),
        ({"clientInfo": {"name": "lone\ud800", "version": "1"}}, "surrogate"),
        ({"capabilities": {"experimental": {"x": {"y": "a\u0000b"}}}}, "NUL"),
    ],
)
async def test_initialize_refuses_what_cannot_be_stored_saying_why(server, raw, params, why):
    error = (await _initialize_with(raw, server, params))["error"]
    assert error["code"] == -32602, error
    assert why in error["message"]

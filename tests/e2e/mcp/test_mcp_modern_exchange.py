"""2026-07-28 POSTs served straight on the SDK's kernel (``mcp_gateway.transport.exchange_2026_07_28``) keep
the SDK transport's rules at the HTTP level: a notification is 202, what is not one request is refused with
its HTTP status, the answer is plain JSON until the handler has something to stream, and a client that
leaves cancels the call it made."""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

import httpx
import pytest

from core.models import AuditAction, AuditEvent
from mcp_gateway.models import TenantToolset
from tests.e2e.raw_mcp import MCP_HEADERS
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# How long the test waits at most for the audit row of a call its client left.
AUDIT_WAIT_SECONDS = 30


@pytest.fixture
async def http():
    async with httpx.AsyncClient(timeout=httpx.Timeout(30)) as client:
        yield client


@pytest.fixture
def token(committed, server) -> str:
    """A token of a tenant of its own, with the conformance toolset on."""
    membership = committed(MembershipFactory)
    committed(
        lambda: TenantToolset.objects.update_or_create(
            tenant=membership.tenant, toolset="conformance", defaults={"enabled": True}
        )
    )
    return str(
        committed(
            AccessTokenFactory, membership=membership, scope="mcp:read mcp:write", resource=[server.mcp_url]
        ).token
    )


def _headers(token: str, method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        **MCP_HEADERS,
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        **extra,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def _call(name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments or {}, "_meta": {**META, **meta}}
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


async def test_a_call_is_answered_as_plain_json(server, http, token):
    response = await http.post(
        server.mcp_url,
        json=_call("test_simple_text"),
        headers=_headers(token, "tools/call", "test_simple_text"),
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["id"] == 7
    assert response.json()["result"]["content"][0]["type"] == "text"


async def test_a_notification_is_accepted_with_202_and_no_body(server, http, token):
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = await http.post(server.mcp_url, json=note, headers=_headers(token, "notifications/cancelled"))
    assert response.status_code == 202
    assert response.content == b""


async def test_a_notification_at_a_version_nobody_serves_is_told_which_are(server, http, token):
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = _headers(token, "notifications/initialized", **{"mcp-protocol-version": "2099-01-01"})
    response = await http.post(server.mcp_url, json=note, headers=headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert response.json()["id"] is None
    assert error["data"]["requested"] == "2099-01-01"
    assert MODERN in error["data"]["supported"]


async def test_a_posted_response_is_an_invalid_request_with_http_400(server, http, token):
    answer = {"jsonrpc": "2.0", "id": 3, "result": {}}
    response = await http.post(server.mcp_url, json=answer, headers=_headers(token, "tools/call"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert response.json()["id"] is None


async def test_a_get_is_405_allowing_post_only(server, http, token):
    response = await http.get(server.mcp_url, headers=_headers(token, "tools/list"))
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_a_body_not_declared_as_json_is_refused_with_400(server, http, token):
    headers = {**_headers(token, "tools/call", "test_simple_text"), "content-type": "text/plain"}
    response = await http.post(server.mcp_url, content=json.dumps(_call("test_simple_text")), headers=headers)
    assert response.status_code == 400


async def test_a_client_that_does_not_take_an_event_stream_is_refused_with_406(server, http, token):
    headers = {**_headers(token, "tools/call", "test_simple_text"), "accept": "application/json"}
    response = await http.post(server.mcp_url, json=_call("test_simple_text"), headers=headers)
    assert response.status_code == 406


async def test_a_routing_header_sent_twice_is_a_header_mismatch_with_http_400(server, http, token):
    headers = [*_headers(token, "tools/call", "test_simple_text").items(), ("mcp-method", "tools/call")]
    response = await http.post(server.mcp_url, json=_call("test_simple_text"), headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020
    assert response.json()["id"] == 7


async def test_a_method_nobody_serves_is_404_with_method_not_found(server, http, token):
    body = {"jsonrpc": "2.0", "id": 9, "method": "no/such", "params": {"_meta": META}}
    response = await http.post(server.mcp_url, json=body, headers=_headers(token, "no/such"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601
    assert response.json()["id"] == 9


async def test_progress_turns_the_answer_into_an_event_stream_ending_with_the_result(server, http, token):
    body = _call("test_tool_with_progress", progressToken="p-1")
    response = await http.post(
        server.mcp_url, json=body, headers=_headers(token, "tools/call", "test_tool_with_progress")
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    progress, last = frames[:-1], frames[-1]
    assert progress
    assert {frame["method"] for frame in progress} == {"notifications/progress"}
    assert {frame["params"]["progressToken"] for frame in progress} == {"p-1"}
    assert last["id"] == 7
    assert "result" in last


async def test_a_client_that_leaves_cancels_its_call(server, token):
    request_id = "e2e-" + secrets.token_hex(8)
    headers = {**_headers(token, "tools/call", "slow_compute"), "x-request-id": request_id}
    body = _call("slow_compute", {"seconds": 120})
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=1)) as leaving:
        with pytest.raises(httpx.ReadTimeout):
            await leaving.post(server.mcp_url, json=body, headers=headers)
    # The row is written when the call ends: at once if the client's leaving cancelled it, not
    # for two minutes otherwise.
    event = None
    for _ in range(AUDIT_WAIT_SECONDS * 10):
        event = await AuditEvent.objects.filter(request_id=request_id).afirst()
        if event is not None:
            break
        await asyncio.sleep(0.1)
    assert event is not None, "the call was not cancelled when its client left"
    assert (event.action, event.target) == (AuditAction.TOOL_CALLED, "slow_compute")
    assert event.detail["cancelled"] is True

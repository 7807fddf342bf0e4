"""Whatever escapes the MCP endpoint's layers is answered as JSON-RPC and audited as a server error,
never with the server's HTML page (``mcp_gateway.transport.failsafe``)."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import pytest
from django.db import DatabaseError

from core.models import AuditAction, AuditEvent, AuditOutcome
from core.request_context import RequestContextMiddleware
from mcp_gateway.transport.failsafe import McpFailsafe

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]


async def _serve(app: Any, request_id: str) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"x-request-id", request_id.encode())],
        "client": ("127.0.0.1", 5000),
    }
    await RequestContextMiddleware(McpFailsafe(app))(scope, receive, send)
    return sent


def _raising(error: Exception) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise error

    return app


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (RuntimeError("a bug"), 500, -32603),
        (RecursionError("maximum recursion depth exceeded"), 500, -32603),
        (DatabaseError("connection lost"), 503, -32005),
    ],
)
async def test_an_unexpected_error_is_answered_as_json_rpc_and_audited(error, status, code):
    request_id = f"failsafe-{type(error).__name__}"
    start, body = await _serve(_raising(error), request_id)
    assert start["status"] == status
    assert dict(start["headers"])[b"content-type"] == b"application/json"
    message = json.loads(body["body"])
    assert message["jsonrpc"] == "2.0"
    assert message["id"] is None
    assert message["error"]["code"] == code
    assert "a bug" not in message["error"]["message"]
    event = await AuditEvent.objects.aget(request_id=request_id)
    assert (event.action, event.outcome) == (AuditAction.SERVER_ERROR, AuditOutcome.ERROR)
    assert event.detail == {"error": type(error).__name__, "code": code}


async def test_a_response_already_started_is_ended_rather_than_replaced():
    async def half_answered(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"event: message\n", "more_body": True})
        raise RuntimeError("mid-stream")

    sent = await _serve(half_answered, "failsafe-mid-stream")
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert await AuditEvent.objects.filter(request_id="failsafe-mid-stream").acount() == 1

"""Requests for the ``Mcp-Param-*`` header tests: 2026-07-28 ``tools/call`` bodies and headers,
and what a refusal or an answer looks like."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx

from accounts.models import Tenant
from tests.e2e.raw_mcp import MCP_HEADERS
from tests.support.factories import AccessTokenFactory, MembershipFactory

HEADER_MISMATCH = -32020
TOOL = "test_custom_headers"
ARGUMENTS = {"region": "us-west1", "priority": 3, "query": "q"}


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return f"=?base64?{base64.b64encode(raw).decode()}?="


def call_body(arguments: dict[str, Any], *, name: str = TOOL, request_id: int = 41) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    }
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def call_headers(token: str, *, name: str = TOOL, **params: str) -> dict[str, str]:
    """The routing headers of a 2026-07-28 call, with ``Mcp-Param-<key>: value`` for ``params``."""
    headers = {
        **MCP_HEADERS,
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    return {**headers, **{f"Mcp-Param-{key}": value for key, value in params.items()}}


def matching_headers(token: str, **extra: str) -> dict[str, str]:
    return call_headers(token, Region="us-west1", Priority="3", **extra)


async def post_call(server, body: Any, headers: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=15) as http:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await http.post(server.mcp_url, content=content, headers=headers)


def only_message(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC answer, whether sent as JSON or as an SSE stream."""
    kind = response.headers.get("content-type", "").split(";")[0]
    assert kind in {"application/json", "text/event-stream"}, (response.status_code, response.text[:300])
    if kind == "application/json":
        return dict(response.json())
    lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    [answer] = [m for m in map(json.loads, lines) if "result" in m or "error" in m]
    return dict(answer)


def refusal_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    message = only_message(response)
    assert message["error"]["code"] == HEADER_MISMATCH, message
    return dict(message)


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    message = only_message(response)
    assert "result" in message, message
    return dict(message["result"])


def received_arguments(result: dict[str, Any]) -> dict[str, Any]:
    text = result["content"][0]["text"]
    return dict(json.loads(text.removeprefix("Custom headers received: ")))


def member_token(server, committed, *, role: str, tenant: str | None, scope: str) -> str:
    """A token for a new member of ``tenant`` (a tenant of its own when None) with ``role``."""

    def member() -> Any:
        if tenant is None:
            return MembershipFactory(role=role)
        return MembershipFactory(role=role, tenant=Tenant.objects.get(slug=tenant))

    membership = committed(member)
    token = committed(AccessTokenFactory, membership=membership, scope=scope, resource=[server.mcp_url])
    return str(token.token)

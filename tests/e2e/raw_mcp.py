"""Raw Streamable HTTP requests, for what the SDK client hides: headers, ids, status codes."""

from __future__ import annotations

import json
from typing import Any

import httpx

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def initialize_body(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-http", "version": "1"},
        },
    }


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages in an SSE (or plain JSON) MCP response."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


class RawMcp:
    """Raw Streamable HTTP requests, for what the SDK client hides: headers, ids, status codes."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.http = httpx.AsyncClient(timeout=15)
        self.next_id = 1

    async def aclose(self) -> None:
        await self.http.aclose()

    def headers(self, session_id: str | None = None, **extra: str) -> dict[str, str]:
        headers = {
            **MCP_HEADERS,
            "authorization": f"Bearer {self.token}",
            "mcp-protocol-version": "2025-11-25",
        }
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        return {**headers, **extra}

    async def initialize(
        self, url: str, *, client_name: str = "raw-http", capabilities: dict[str, Any] | None = None
    ) -> str:
        body = initialize_body()
        body["params"]["clientInfo"] = {"name": client_name, "version": "9.9"}
        body["params"]["capabilities"] = capabilities or {}
        response = await self.http.post(
            url, json=body, headers={**MCP_HEADERS, "authorization": f"Bearer {self.token}"}
        )
        assert response.status_code == 200, response.text
        session_id = response.headers["mcp-session-id"]
        notified = await self.http.post(
            url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=self.headers(session_id),
        )
        assert notified.status_code == 202, notified.text
        return session_id

    async def request(
        self, url: str, method: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> httpx.Response:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        return await self.http.post(url, json=body, headers=self.headers(**kw))

    async def result(
        self, url: str, method: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> dict[str, Any]:
        response = await self.request(url, method, params, **kw)
        assert response.status_code == 200, response.text
        (message,) = [m for m in sse_messages(response) if "id" in m]
        assert "result" in message, message
        return dict(message["result"])

"""A raw 2026-07-28 caller over HTTP (one token, a tenant of its own) and the frames of its
``subscriptions/listen`` streams, for the end-to-end tests of the stateless era."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from tests.e2e.raw_mcp import MCP_HEADERS

MODERN = "2026-07-28"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
# A refusal is answered at once; this only bounds how long a wrongly acknowledged stream is read.
REFUSAL_SECONDS = 15


def request_meta(capabilities: dict[str, Any] | None = None, /, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        **extra,
    }


class Caller:
    """One token's raw 2026-07-28 requests."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self.http = http
        self.token = token
        self.next_id = 100

    def headers(self, method: str, name: str | None = None) -> dict[str, str]:
        headers = {
            **MCP_HEADERS,
            "authorization": f"Bearer {self.token}",
            "mcp-protocol-version": MODERN,
            "mcp-method": method,
        }
        if name is not None:
            headers["mcp-name"] = name
        return headers

    def body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    async def call_tool(
        self,
        url: str,
        name: str,
        *,
        arguments: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        input_responses: dict[str, Any] | None = None,
    ) -> tuple[httpx.Response, list[dict[str, Any]]]:
        params = {"name": name, "arguments": arguments or {}, "_meta": meta or request_meta()}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        response = await self.http.post(
            url, json=self.body("tools/call", params), headers=self.headers("tools/call", name)
        )
        return response, messages(response)

    async def listen_refused(self, url: str, notifications: dict[str, bool]) -> httpx.Response:
        """A listen request expected to be refused: its whole answer, which must end (a stream
        acknowledged instead would stay open, kept alive by pings)."""
        params = {"_meta": request_meta(), "notifications": notifications}
        body = self.body("subscriptions/listen", params)
        async with asyncio.timeout(REFUSAL_SECONDS):
            return await self.http.post(url, json=body, headers=self.headers("subscriptions/listen"))

    @asynccontextmanager
    async def listen(self, url: str, notifications: dict[str, bool]) -> AsyncIterator[Stream]:
        params = {"_meta": request_meta(), "notifications": notifications}
        body = self.body("subscriptions/listen", params)
        async with self.http.stream(
            "POST", url, json=body, headers=self.headers("subscriptions/listen")
        ) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            yield Stream(response, body["id"])


class Stream:
    """The frames of one listen stream, in order."""

    def __init__(self, response: httpx.Response, subscription_id: int) -> None:
        self.lines = response.aiter_lines()
        self.subscription_id = subscription_id

    async def next(self) -> dict[str, Any]:
        async for line in self.lines:
            if line.startswith("data:"):
                return json.loads(line[5:])
        raise AssertionError("the stream ended")

    async def acknowledged(self) -> dict[str, Any]:
        first = await self.next()
        assert first["method"] == ACKNOWLEDGED, first
        assert first["params"]["_meta"][SUBSCRIPTION_ID] == self.subscription_id
        return first


def messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]

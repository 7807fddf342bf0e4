"""The load client of the MCP benchmarks: authenticated ``tools/call`` for a fixed time at a given
concurrency, in either protocol era, with one aiohttp client (an httpx client saturates before the
servers do).

- ``2025-11-25``: one session per concurrent worker (``initialize`` and ``notifications/initialized``
  first, then every call carries ``Mcp-Session-Id``), as clients of the handshake era do.
- ``2026-07-28``: no session; each call is a self-contained POST with the ``Mcp-Protocol-Version``,
  ``Mcp-Method`` and ``Mcp-Name`` headers and the ``_meta`` envelope (protocol version, client
  capabilities and client info) in its params.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field

import aiohttp

ERAS = ("2025-11-25", "2026-07-28")
TOOL = "test_simple_text"
BASE_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Level:
    """What one server did at one concurrency: calls answered, failures, and each call's latency."""

    concurrency: int
    calls: int = 0
    errors: int = 0
    # Every POST the server answered, handshakes and warm-up included: what SQL is counted against.
    requests: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    first_error: str = ""

    @property
    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds else float("nan")

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) * 1000 if self.latencies else float("nan")

    @property
    def p99(self) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def call_body(era: str) -> dict[str, object]:
    params: dict[str, object] = {"name": TOOL, "arguments": {}}
    if era == "2026-07-28":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        }
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}


# A 2025-11-25 session's handshake request; ``notifications/initialized`` follows it.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


async def open_session(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> dict[str, str]:
    """A 2025-11-25 session's headers, after its handshake (two requests)."""
    async with http.post(url, json=INITIALIZE, headers=headers) as response:
        text = await response.text()
        if response.status != 200:
            raise RuntimeError(f"initialize answered {response.status}: {text[:300]}")
        if "mcp-session-id" not in response.headers:
            raise RuntimeError(f"initialize answered no session id: {text[:300]}")
        session_headers = {**headers, "mcp-session-id": response.headers["mcp-session-id"]}
    session_headers["mcp-protocol-version"] = "2025-11-25"
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=note, headers=session_headers) as response:
        await response.read()
    return session_headers


async def answering(url: str, token: str | None, *, seconds: float = 60) -> None:
    """Wait until the server answers a call: a server that has just started may refuse its first
    ones (Gatehouse opens its database pool on the first request, which under load can take longer
    than the pool's wait)."""
    headers = {
        **BASE_HEADERS,
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": TOOL,
    }
    if token:
        headers["authorization"] = f"Bearer {token}"
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.post(url, data=json.dumps(call_body("2026-07-28")), headers=headers) as response:
                body = await response.read()
            if response.status == 200 and b'"result"' in body:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} still answers {response.status} {body[:300]!r}")
            await asyncio.sleep(0.5)


async def drive(
    url: str, token: str | None, *, era: str, concurrency: int, seconds: float, warmup: float = 0.0
) -> Level:
    """``concurrency`` workers calling for ``seconds`` (after ``warmup`` seconds not counted)."""
    headers = dict(BASE_HEADERS)
    if token:
        headers["authorization"] = f"Bearer {token}"
    level = Level(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency + 4)
    async with aiohttp.ClientSession(connector=connector) as http:
        if era == "2025-11-25":
            workers = [await open_session(http, url, headers) for _ in range(concurrency)]
            level.requests += 2 * concurrency
        else:
            modern = {**headers, "mcp-protocol-version": era, "mcp-method": "tools/call", "mcp-name": TOOL}
            workers = [modern] * concurrency
        payload = json.dumps(call_body(era))
        counting = False

        async def worker(worker_headers: dict[str, str], stop_at: float) -> None:
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                async with http.post(url, data=payload, headers=worker_headers) as response:
                    body = await response.read()
                level.requests += 1
                if not counting:
                    continue
                if response.status == 200 and b'"result"' in body:
                    level.calls += 1
                    level.latencies.append(time.perf_counter() - started)
                else:
                    level.errors += 1
                    level.first_error = level.first_error or f"{response.status} {body[:200]!r}"

        if warmup:
            await asyncio.gather(*(worker(w, time.monotonic() + warmup) for w in workers))
        counting = True
        began = time.monotonic()
        await asyncio.gather(*(worker(w, began + seconds) for w in workers))
        level.seconds = time.monotonic() - began
    return level

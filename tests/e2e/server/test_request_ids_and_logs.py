"""Request ids on every response of a real Daphne process, and the JSON log lines that carry them."""

from __future__ import annotations

import asyncio
import json
import secrets
import time

import httpx
import httpx2
import pytest

from tests.e2e.harness import DaphneServer, Person, sdk_client
from tests.e2e.oauth_driver import minted_sdk_client

pytestmark = pytest.mark.django_db


class RecordingTransport(httpx2.AsyncHTTPTransport):
    """Keeps every response the SDK client received, to look at headers the SDK does not expose."""

    def __init__(self) -> None:
        super().__init__()
        self.responses: list[httpx2.Response] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        self.responses.append(response)
        return response


def _request_id() -> str:
    return f"e2e-{secrets.token_hex(8)}"


async def _json_lines_with(server: DaphneServer, request_id: str) -> list[dict]:
    """The server's log lines mentioning this request id, parsed; waits for the access line, which is
    written once the response has gone out (at once, but a busy machine may take its time)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = [line for line in server.log().splitlines() if request_id in line]
        if any('"gatehouse.access"' in line for line in lines):
            return [json.loads(line) for line in lines]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no access line for {request_id} in the server log:\n{server.log()[-3000:]}")


@pytest.mark.parametrize("path", ["/accounts/login/", "/health", "/.well-known/oauth-authorization-server"])
def test_a_page_echoes_the_client_s_request_id(server, path):
    request_id = _request_id()
    response = httpx.get(f"{server.base_url}{path}", headers={"X-Request-Id": request_id}, timeout=10)
    assert response.status_code == 200
    assert response.headers["x-request-id"] == request_id


def test_a_page_makes_up_a_request_id_when_the_client_sends_none_or_a_bad_one(server):
    plain = httpx.get(f"{server.base_url}/health", timeout=10)
    bad = httpx.get(f"{server.base_url}/health", headers={"X-Request-Id": "a b c"}, timeout=10)
    assert len(plain.headers["x-request-id"]) == 32
    assert len(bad.headers["x-request-id"]) == 32
    assert bad.headers["x-request-id"] != "a b c"


def test_an_unauthenticated_mcp_request_still_carries_a_request_id(server):
    request_id = _request_id()
    response = httpx.post(
        server.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"X-Request-Id": request_id, "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert response.status_code == 401
    assert response.headers["x-request-id"] == request_id


async def test_every_response_to_the_sdk_client_carries_a_request_id(server):
    recorder = RecordingTransport()
    async with sdk_client(server, Person("alice"), transport=recorder) as (client, _):
        await client.call_tool("whoami", {})

    mcp_responses = [r for r in recorder.responses if r.request.url.path == "/mcp"]
    assert len(mcp_responses) >= 3  # the 401 challenge, initialize, the call (and more)
    assert all(r.headers.get("x-request-id") for r in recorder.responses)
    assert len({r.headers["x-request-id"] for r in recorder.responses}) == len(recorder.responses)


async def test_the_server_log_holds_a_json_access_line_for_a_request(server):
    request_id = _request_id()
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(
            f"{server.base_url}/health?state=do-not-log-me", headers={"X-Request-Id": request_id}
        )
    assert response.status_code == 200

    lines = await _json_lines_with(server, request_id)
    [access] = [line for line in lines if line["logger"] == "gatehouse.access"]
    assert access["request_id"] == request_id
    assert access["level"] == "INFO"
    assert (access["method"], access["path"], access["status"]) == ("GET", "/health", 200)
    assert access["ip"] == "127.0.0.1"
    assert access["duration_ms"] >= 0
    assert "do-not-log-me" not in server.log()


async def test_the_server_log_ties_an_mcp_tool_call_to_its_request_id(server, committed):
    recorder = RecordingTransport()
    async with minted_sdk_client(committed, server, Person("alice"), transport=recorder) as (client, _):
        await client.call_tool("whoami", {})
    [call] = [r for r in recorder.responses if b'"tools/call"' in r.request.content]

    lines = await _json_lines_with(server, call.headers["x-request-id"])
    [access] = [line for line in lines if line["logger"] == "gatehouse.access"]
    assert (access["method"], access["path"], access["status"]) == ("POST", "/mcp", 200)


async def test_everything_a_server_logs_from_start_to_stop_is_one_json_object_per_line(
    demo, database_url, tmp_path
):
    server = DaphneServer(database_url=database_url, log_path=tmp_path / "json.log")
    server.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            await http.get(f"{server.base_url}/accounts/login/")
            await http.get(f"{server.base_url}/no-such-page")
            await http.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        async with sdk_client(server, Person("alice")) as (client, _):
            await client.call_tool("whoami", {})
    finally:
        server.stop()

    lines = server.log().splitlines()
    assert len(lines) > 5
    parsed = [json.loads(line) for line in lines]
    assert all({"timestamp", "level", "logger", "message", "request_id"} <= line.keys() for line in parsed)
    assert {"/accounts/login/", "/no-such-page", "/mcp"} <= {line.get("path") for line in parsed}

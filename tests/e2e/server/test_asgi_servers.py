"""``config.asgi:application`` under uvicorn, not only Daphne: an authenticated MCP call on both
protocol eras, the ASGI lifespan answered, static files served, and the outermost layers (one Host
header, the bearer check) in place. The speed benchmark runs Gatehouse under uvicorn too
(benchmarks/mcp_throughput.py); this is what makes its figures those of the same product."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import DaphneServer
from tests.e2e.param_headers import call_body, call_headers, member_token, result_of
from tests.e2e.raw_mcp import RawMcp

pytestmark = pytest.mark.django_db


class UvicornServer(DaphneServer):
    """The same server process and environment, under uvicorn; its own access log off, as Daphne's
    (Gatehouse writes one without query strings)."""

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "uvicorn",
            "--no-access-log",
            # uvicorn takes the descriptor for a Unix socket's (its TCP connections go without
            # TCP_NODELAY): no matter for what these tests check, which is none of its speed.
            "--fd",
            str(self.listening_fd),
            "config.asgi:application",
        ]


@pytest.fixture(scope="module")
def uvicorn_server(database_url, tmp_path_factory) -> Iterator[UvicornServer]:
    log_path = Path(tmp_path_factory.mktemp("uvicorn")) / "uvicorn.log"
    server = UvicornServer(database_url=database_url, log_path=log_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def token(uvicorn_server, committed) -> str:
    return member_token(uvicorn_server, committed, role="viewer", tenant="acme", scope="mcp:read")


async def test_a_2025_session_call_is_answered_for_its_bearer(uvicorn_server, token):
    raw = RawMcp(token)
    try:
        session_id = await raw.initialize(uvicorn_server.mcp_url)
        response = await raw.request(
            uvicorn_server.mcp_url, "tools/call", {"name": "whoami", "arguments": {}}, session_id=session_id
        )
    finally:
        await raw.aclose()
    assert response.status_code == 200, response.text
    assert "acme" in response.text
    assert '"isError":true' not in response.text.replace(" ", "")


async def test_a_2026_stateless_call_is_answered_for_its_bearer(uvicorn_server, token):
    async with httpx.AsyncClient(timeout=15) as http:
        response = await http.post(
            uvicorn_server.mcp_url,
            json=call_body({}, name="whoami"),
            headers=call_headers(token, name="whoami"),
        )
    result = result_of(response)
    assert result.get("isError") is not True
    assert "acme" in str(result["content"])


async def test_a_call_without_a_token_is_refused_with_the_discovery_header(uvicorn_server):
    async with httpx.AsyncClient(timeout=15) as http:
        response = await http.post(
            uvicorn_server.mcp_url,
            json=call_body({}, name="whoami"),
            headers={k: v for k, v in call_headers("x", name="whoami").items() if k != "authorization"},
        )
    assert response.status_code == 401
    assert "resource_metadata" in response.headers["www-authenticate"]


def test_pages_and_static_files_are_served(uvicorn_server):
    assert httpx.get(uvicorn_server.base_url + "/", timeout=15).status_code == 200
    static = httpx.get(uvicorn_server.base_url + "/static/admin/img/icon-clock.svg", timeout=15)
    assert static.status_code == 200
    assert static.headers["content-type"].startswith("image/svg")


def test_a_foreign_host_is_refused(uvicorn_server):
    response = httpx.get(uvicorn_server.base_url + "/", headers={"host": "evil.example"}, timeout=15)
    assert response.status_code == 400


@pytest.mark.parametrize("path", ["/", "/mcp"])
def test_a_request_with_two_host_headers_is_refused(uvicorn_server, path):
    # httpx sends one Host header at most; the second needs a raw request.
    host = f"127.0.0.1:{uvicorn_server.port}"
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\n"
        "content-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
    )
    with socket.create_connection(("127.0.0.1", uvicorn_server.port), timeout=15) as sock:
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    # uvicorn's h11 parser refuses it itself; with httptools the request reaches Gatehouse, whose
    # outermost layer refuses it (core.host_header). Either way: a 400, never an answer.
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]


def test_the_lifespan_is_answered(uvicorn_server):
    log = uvicorn_server.log()
    assert "Application startup complete" in log
    assert "lifespan" not in log.lower()

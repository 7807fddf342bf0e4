"""Hostile input at every door: zero 500s, zero hangs, every answer in its endpoint's error shape.

The corpus (``fuzz_corpus``) is fixed, so a failure replays; every case runs against one Daphne
server on PostgreSQL, and the test reports all failing cases at once rather than the first.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from typing import Any

import httpx
import pytest

from tests.e2e.fuzz_corpus import RAW_REQUESTS, Case, corpus
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_token
from tests.e2e.raw_mcp import MCP_HEADERS, RawMcp

pytestmark = pytest.mark.django_db

# "Zero hangs over 5 s": each answer must arrive within this, however hostile the request.
HANG_SECONDS = 5.0
CONCURRENCY = 4


def _mcp_messages(response: httpx.Response) -> list[Any]:
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return [json.loads(response.content)]


def _is_jsonrpc_error(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if "result" in message:
        return True
    error = message.get("error")
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and isinstance(error.get("message"), str)
    )


def _is_oauth_error(message: Any) -> bool:
    return isinstance(message, dict) and isinstance(message.get("error"), str)


def shape_problem(case: Case, response: httpx.Response) -> str | None:
    """Why the answer is not in the endpoint's shape, or None."""
    status = response.status_code
    if status >= 500:
        return f"answered {status}"
    if case.kind == "mcp":
        if status in (202, 204):
            return None
        try:
            messages = _mcp_messages(response)
        except ValueError:
            return f"{status} with a body that is not JSON: {response.text[:120]!r}"
        if not messages:
            return f"{status} with no JSON-RPC message"
        for message in messages:
            batch = message if isinstance(message, list) else [message]
            if not all(_is_jsonrpc_error(item) or _is_oauth_error(item) for item in batch):
                return f"{status} with a message in no known shape: {str(message)[:160]}"
        return None
    if case.kind == "oauth_json":
        if status in (200, 201, 204) and case.path.startswith("/oauth/revoke_token/"):
            return None
        try:
            body = response.json()
        except ValueError:
            return f"{status} with a body that is not JSON: {response.text[:120]!r}"
        if status >= 400 and not _is_oauth_error(body):
            return f"{status} not in the OAuth error shape: {str(body)[:160]}"
        return None
    if case.kind == "authorize":
        if status in (200, 302, 400, 401, 403, 404):
            return None
        return f"unexpected {status}"
    if case.kind == "login":
        if status in (302, 429):
            return None
        if status in (200, 400, 403) and "<form" in response.text:
            return None
        return f"{status} without the login form: {response.text[:120]!r}"
    return f"unknown kind {case.kind}"


@pytest.fixture
async def mcp_credentials(server, committed):
    token = minted_token(committed, server, Person("alice"))
    raw = RawMcp(token)
    session_id = await raw.initialize(server.mcp_url)
    await raw.aclose()
    return token, session_id


async def _login_form(http: httpx.AsyncClient) -> str:
    page = await http.get("/accounts/login/")
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert match, page.text[:300]
    return match.group(1)


async def _send(
    http: httpx.AsyncClient, case: Case, *, token: str, session_id: str, csrf: str
) -> httpx.Response:
    headers: dict[str, str] = {}
    body = case.body
    if case.kind == "mcp":
        headers.update(MCP_HEADERS)
        headers["mcp-protocol-version"] = "2025-11-25"
        if case.authenticated:
            headers["authorization"] = f"Bearer {token}"
        if case.with_session:
            headers["mcp-session-id"] = session_id
    if case.kind == "login" and case.method == "POST" and body is not None:
        body += f"&csrfmiddlewaretoken={csrf}".encode()
    headers.update(case.headers)
    # An empty value means: leave the header out.
    headers = {key: value for key, value in headers.items() if value != ""}
    return await http.request(case.method, case.path, content=body, headers=headers)


async def test_no_endpoint_answers_a_hostile_request_with_a_500_a_hang_or_a_foreign_shape(
    server, mcp_credentials
):
    token, session_id = mcp_credentials
    failures: list[str] = []
    limiter = asyncio.Semaphore(CONCURRENCY)
    timeout = httpx.Timeout(HANG_SECONDS)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=timeout, follow_redirects=False) as http:
        csrf = await _login_form(http)

        async def run(case: Case) -> None:
            async with limiter:
                started = time.monotonic()
                try:
                    response = await _send(http, case, token=token, session_id=session_id, csrf=csrf)
                except httpx.TimeoutException:
                    failures.append(f"{case.name}: no answer within {HANG_SECONDS} s")
                    return
                except httpx.HTTPError as exc:
                    failures.append(f"{case.name}: {type(exc).__name__} {exc}")
                    return
                problem = shape_problem(case, response)
                if problem is not None:
                    failures.append(f"{case.name}: {problem}")
                elif time.monotonic() - started > HANG_SECONDS:
                    failures.append(f"{case.name}: took {time.monotonic() - started:.1f} s")

        cases = corpus()
        await asyncio.gather(*(run(case) for case in cases))

    assert server.process is not None
    assert server.process.poll() is None, "the server died during the fuzz run"
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(sorted(failures))


def _raw_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_SECONDS) as sock:
        # Asking the server to close after its answer marks where the answer ends.
        head, _, rest = request.partition(b"\r\n")
        sock.sendall(head + b"\r\nConnection: close\r\n" + rest)
        received = b""
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


@pytest.mark.parametrize("name", sorted(RAW_REQUESTS))
def test_requests_no_client_library_would_send_get_a_4xx_or_a_closed_connection(server, name):
    """A protocol violation may end the connection; it must never be answered 5xx or hang."""
    try:
        answer = _raw_exchange(server.port, RAW_REQUESTS[name])
    except TimeoutError:
        pytest.fail(f"{name}: no answer and no close within {HANG_SECONDS} s")
    if answer:
        status_line = answer.split(b"\r\n", 1)[0]
        match = re.match(rb"HTTP/1\.[01] (\d{3})", status_line)
        assert match, status_line[:100]
        assert int(match.group(1)) < 500, answer[:300]


def test_two_host_headers_are_refused_with_400(server):
    answer = _raw_exchange(server.port, RAW_REQUESTS["duplicate host"])
    assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.0 400")), answer[:300]

"""Two Host headers are refused with 400 everywhere, in the shape of the endpoint asked, and audited.

httpx cannot send a header twice, so these requests are written on a raw socket."""

from __future__ import annotations

import json
import secrets
import socket

import pytest

from core.host_header import DUPLICATE_HOST
from core.models import AuditAction, AuditOutcome
from tests.e2e.stamping import audit_events
from tests.support.factories import AccessTokenFactory

pytestmark = pytest.mark.django_db


def _raw_request(server, lines: list[str], body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    head = "\r\n".join([*lines, f"Content-Length: {len(body)}", "Connection: close", "", ""]).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        sock.sendall(head + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    raw_head, _, raw_body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, raw_body


def _hosts(server, first: str = "") -> list[str]:
    own = f"127.0.0.1:{server.port}"
    return [f"Host: {first or own}", "Host: evil.example"]


async def test_two_host_headers_at_mcp_are_a_json_rpc_invalid_request(server, committed):
    token = committed(AccessTokenFactory, resource=[server.mcp_url])
    request_id = "e2e-" + secrets.token_hex(8)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    status, headers, answer = _raw_request(
        server,
        [
            "POST /mcp HTTP/1.1",
            *_hosts(server),
            f"Authorization: Bearer {token.token}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"X-Request-Id: {request_id}",
        ],
        body,
    )
    assert status == 400, answer
    assert headers["x-request-id"] == request_id
    assert json.loads(answer)["error"] == {"code": -32600, "message": DUPLICATE_HOST}
    [event] = await audit_events(request_id)
    assert (event.action, event.outcome, event.target) == (
        AuditAction.REQUEST_REFUSED,
        AuditOutcome.DENIED,
        "host",
    )
    assert event.detail["hosts"] == [f"127.0.0.1:{server.port}", "evil.example"]


def test_two_host_headers_at_an_oauth_endpoint_are_an_oauth_error(server):
    status, _, answer = _raw_request(
        server, ["GET /.well-known/oauth-authorization-server HTTP/1.1", *_hosts(server)]
    )
    assert status == 400
    assert json.loads(answer) == {"error": "invalid_request", "error_description": DUPLICATE_HOST}


def test_two_host_headers_on_a_page_are_refused_even_when_the_first_is_allowed(server):
    status, _, answer = _raw_request(server, ["GET /accounts/login/ HTTP/1.1", *_hosts(server)])
    assert status == 400
    assert answer.decode() == DUPLICATE_HOST


def test_one_host_header_is_served(server):
    status, _, _ = _raw_request(
        server, ["GET /.well-known/oauth-authorization-server HTTP/1.1", f"Host: 127.0.0.1:{server.port}"]
    )
    assert status == 200

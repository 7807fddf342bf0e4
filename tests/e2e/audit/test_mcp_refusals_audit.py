"""What the MCP endpoint refuses before any tool runs leaves an audit row: refused tokens, another
person's session id, a foreign Host or Origin. The token itself is never recorded."""

from __future__ import annotations

import json
import secrets
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.bearer import TOKEN_EXPIRED, TOKEN_UNKNOWN, TOKEN_WRONG_RESOURCE
from tests.e2e.raw_mcp import MCP_HEADERS, RawMcp, initialize_body
from tests.e2e.stamping import audit_events
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def _stamp() -> str:
    return "e2e-" + secrets.token_hex(8)


async def _post(server, headers: dict[str, str], request_id: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=15) as http:
        return await http.post(
            server.mcp_url,
            json=initialize_body(),
            headers={**MCP_HEADERS, **headers, "x-request-id": request_id},
        )


def _never_holds(event: AuditEvent, secret: str) -> None:
    row = json.dumps(
        [event.target, event.session_id, event.username, event.client_id, event.detail], default=str
    )
    assert secret not in row


async def test_a_garbage_token_is_audited_as_rejected_without_the_token(server):
    request_id, garbage = _stamp(), "garbage-" + secrets.token_hex(12)
    response = await _post(server, {"authorization": f"Bearer {garbage}"}, request_id)
    assert response.status_code == 401
    [event] = await audit_events(request_id)
    assert (event.action, event.outcome) == (AuditAction.TOKEN_REJECTED, AuditOutcome.DENIED)
    assert event.detail["reason"] == TOKEN_UNKNOWN
    assert event.ip == "127.0.0.1"
    _never_holds(event, garbage)


@pytest.mark.parametrize(
    ("token_kwargs", "reason"),
    [
        ({"expires": timezone.now() - timedelta(seconds=1)}, TOKEN_EXPIRED),
        ({"resource": ["https://elsewhere.example/mcp"]}, TOKEN_WRONG_RESOURCE),
    ],
)
async def test_an_expired_or_foreign_token_is_audited_with_which_token_it_was(
    server, committed, token_kwargs, reason
):
    token = committed(AccessTokenFactory, **token_kwargs)
    request_id = _stamp()
    response = await _post(server, {"authorization": f"Bearer {token.token}"}, request_id)
    assert response.status_code == 401
    [event] = await audit_events(request_id)
    assert event.action == AuditAction.TOKEN_REJECTED
    assert event.detail["reason"] == reason
    assert event.detail["tokenId"] == token.pk
    assert event.detail["userId"] == token.user_id
    _never_holds(event, token.token)


async def test_a_request_without_any_token_is_only_challenged(server):
    request_id = _stamp()
    response = await _post(server, {}, request_id)
    assert response.status_code == 401
    assert await audit_events(request_id) == []


async def test_another_person_s_session_id_is_audited_as_refused(server, committed):
    owner = committed(AccessTokenFactory, membership=committed(MembershipFactory), resource=[server.mcp_url])
    intruder_membership = committed(MembershipFactory)
    intruder = committed(AccessTokenFactory, membership=intruder_membership, resource=[server.mcp_url])
    owner_mcp, intruder_mcp = RawMcp(owner.token), RawMcp(intruder.token)
    try:
        session_id = await owner_mcp.initialize(server.mcp_url)
        request_id = _stamp()
        response = await intruder_mcp.http.post(
            server.mcp_url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**intruder_mcp.headers(session_id), "x-request-id": request_id},
        )
    finally:
        await owner_mcp.aclose()
        await intruder_mcp.aclose()
    assert response.status_code == 404
    [event] = await audit_events(request_id)
    assert (event.action, event.outcome) == (AuditAction.SESSION_REFUSED, AuditOutcome.DENIED)
    assert event.username == intruder_membership.user.username
    assert event.session_id == session_id


@pytest.mark.parametrize(
    ("header", "value", "target", "status"),
    # A Host this server does not answer for is a misdirected request (421); a foreign Origin is
    # forbidden (403).
    [("host", "evil.example", "host", 421), ("origin", "https://evil.example", "origin", 403)],
)
async def test_a_foreign_host_or_origin_is_audited_as_a_refused_request(
    server, committed, header, value, target, status
):
    token = committed(AccessTokenFactory, resource=[server.mcp_url])
    request_id = _stamp()
    response = await _post(server, {"authorization": f"Bearer {token.token}", header: value}, request_id)
    assert response.status_code == status
    [event] = await audit_events(request_id)
    assert (event.action, event.target) == (AuditAction.REQUEST_REFUSED, target)
    assert event.detail[target] == value


@pytest.mark.parametrize("session_id", ["caf\xe9-" + "x" * 5000, "' OR 1=1 --"])
async def test_a_hostile_session_id_is_refused_and_audited_cut_to_the_column(server, committed, session_id):
    membership = committed(MembershipFactory)
    token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url])
    request_id = _stamp()
    async with httpx.AsyncClient(timeout=15) as http:
        response = await http.post(
            server.mcp_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                **MCP_HEADERS,
                "authorization": f"Bearer {token.token}",
                "mcp-protocol-version": "2025-11-25",
                "mcp-session-id": session_id.encode("latin-1"),
                "x-request-id": request_id,
            },
        )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32002
    [event] = await audit_events(request_id)
    assert event.action == AuditAction.SESSION_REFUSED
    assert event.session_id == session_id[:64]

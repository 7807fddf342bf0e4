"""Stamp each request a test sends with its own X-Request-Id, to find the audit rows it caused."""

from __future__ import annotations

import json
import secrets

import httpx2

from core.models import AuditEvent
from tests.support.waiting import eventually


class StampingTransport(httpx2.AsyncHTTPTransport):
    """Gives every request the client sends its own X-Request-Id, and remembers which was which."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str]] = []
        self.session_ids: set[str] = set()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request_id = "e2e-" + secrets.token_hex(8)
        request.headers["x-request-id"] = request_id
        label = request.method
        if request.method == "POST" and request.url.path == "/mcp":
            label = json.loads(request.content).get("method", "answer")
        response = await super().handle_async_request(request)
        assert response.headers["x-request-id"] == request_id
        # A 401 is answered before anyone is known; the client retries with its new token.
        if response.status_code != 401:
            self.sent.append((label, request_id))
        if "mcp-session-id" in response.headers:
            self.session_ids.add(response.headers["mcp-session-id"])
        return response

    def request_ids(self, label: str) -> list[str]:
        return [request_id for sent, request_id in self.sent if sent == label]


AUDIT_DEADLINE_SECONDS = 30


async def audit_event_awaited(request_id: str) -> AuditEvent:
    """The one audit row of the request (written as the answer goes out, so waited for a moment)."""
    events: list[AuditEvent] = []

    async def written() -> bool:
        nonlocal events
        events = await audit_events(request_id)
        return bool(events)

    await eventually(written, within=AUDIT_DEADLINE_SECONDS, what=f"an audit row for {request_id}")
    [event] = events
    return event


async def audit_events(request_id: str) -> list[AuditEvent]:
    """The audit rows of one request, with who and where."""
    return [
        event
        async for event in AuditEvent.objects.filter(request_id=request_id).select_related(
            "user", "tenant", "application"
        )
    ]

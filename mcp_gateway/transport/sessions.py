"""Handshake-era MCP sessions kept in the database, so that any worker serves any session.

The SDK keeps a session's transport in one process's memory, so a second process answers 404 for
it. Gatehouse keeps what a session is (who opened it, with which client, capabilities, scopes and
protocol version, and whether it is still alive) in PostgreSQL, and serves each POST on its own
(``exchange_handshake_era``). Server-to-client requests ride the response of the request they belong
to, and the client's answer reaches the waiting worker through the relay (``relay``). A session's
standalone ``GET`` stream (``standalone_stream``) carries the notifications outside any request.
2026-07-28 requests carry their own envelope and need no session at all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from mcp_types import InitializeRequestParams
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from core.asgi_http import request_header
from core.db import db_call
from core.identity import Identity
from core.models import AuditAction
from mcp_gateway.kernel.identity_cache import identity_cache
from mcp_gateway.kernel.scope_keys import (
    IDENTITY_KEY,
    INITIALIZED_HOOK_KEY,
    LIVE_SESSION_KEY,
    MESSAGE_KEY,
    SESSION_KEY,
)
from mcp_gateway.kernel.sessions import (
    LiveSession,
    session_client_check,
    session_is_idle,
    session_needs_touch,
    session_new_id,
    session_open,
    session_terminate,
    session_touch,
)
from mcp_gateway.models import TerminationReason
from mcp_gateway.transport.envelope import jsonrpc_error
from oauth.edge_refusals import edge_audit

if TYPE_CHECKING:
    from mcp_gateway.transport.standalone_stream import StandaloneStreams

SESSION_HEADER = b"mcp-session-id"

SESSION_REQUIRED = "Bad Request: Missing session ID"
SESSION_NOT_FOUND = "Session not found"
REFUSED_UNKNOWN = "No live session of this caller has this id (unknown, ended, or another's)."
REFUSED_IDLE = "The session was idle past its lifetime and has ended."
METHOD_NOT_ALLOWED = "Method not allowed: /mcp takes POST, GET (the session's stream) and DELETE."


def _is_initialize(message: Any) -> bool:
    return isinstance(message, dict) and message.get("method") == "initialize"


class McpSessionMiddleware:
    """Handshake-era requests only: the endpoint routes 2026-07-28 ones elsewhere first."""

    def __init__(self, app: ASGIApp, *, streams: StandaloneStreams | None = None) -> None:
        self.app = app
        self.streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        identity: Identity = scope[IDENTITY_KEY]
        session_id = request_header(scope, SESSION_HEADER)
        method = scope["method"]

        if method == "POST" and _is_initialize(scope.get(MESSAGE_KEY)):
            await self._initialize(scope, receive, send, identity)
            return

        if session_id is None:
            await jsonrpc_error(send, status=400, code=-32600, message=SESSION_REQUIRED)
            return
        session: LiveSession | None = scope.get(LIVE_SESSION_KEY)
        now = timezone.now()
        refusal = REFUSED_UNKNOWN
        if session is not None and session_is_idle(session=session, now=now):
            await db_call(session_terminate, session_id=session.id, reason=TerminationReason.EXPIRED)
            identity_cache.forget(("session", session.id))
            session, refusal = None, REFUSED_IDLE
        if session is None:
            # Unknown, ended, or another person's: the same 404 for all (none confirms the id
            # exists), and an audit row, as a guessed or stolen id is worth an operator's look.
            await edge_audit(
                action=AuditAction.SESSION_REFUSED,
                identity=identity,
                session_id=session_id,
                target=method,
                detail={"reason": refusal},
            )
            await jsonrpc_error(send, status=404, code=-32002, message=SESSION_NOT_FOUND)
            return
        if session_needs_touch(session=session, now=now):
            await db_call(session_touch, session_id=session.id, now=now)
        if method == "DELETE":
            await db_call(session_terminate, session_id=session.id, reason=TerminationReason.CLIENT)
            # Every worker hears of it (identity_cache); this one need not wait for that.
            identity_cache.forget(("session", session.id))
            if self.streams is not None:
                self.streams.end_session(session.id)
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if method == "GET" and self.streams is not None:
            narrowed = _narrowed(identity, session.scopes)
            await self.streams.serve(scope, receive, send, session=session, identity=narrowed)
            return
        if method != "POST":
            allow = b"GET, POST, DELETE" if self.streams is not None else b"POST, DELETE"
            await jsonrpc_error(
                send, status=405, code=-32600, message=METHOD_NOT_ALLOWED, headers=[(b"allow", allow)]
            )
            return
        # The exchange speaks the session's negotiated version, whatever header (if any, as with
        # 2024-11-05 clients) the request carries. A session opened with fewer scopes never gains
        # more from a later, broader token.
        narrowed = _narrowed(identity, session.scopes)
        await self.app({**scope, SESSION_KEY: session, IDENTITY_KEY: narrowed}, receive, send)

    async def _initialize(self, scope: Scope, receive: Receive, send: Send, identity: Identity) -> None:
        session_id = session_new_id()

        async def opened(
            client: InitializeRequestParams | None, protocol_version: str
        ) -> list[tuple[bytes, bytes]]:
            capabilities = _as_json(client.capabilities) if client else {}
            # Refused (-32602) before anything is written; the exchange answers the request with it.
            session_client_check(
                client_info=_as_json(client.client_info) if client else {}, client_capabilities=capabilities
            )
            # The row exists before the client can learn the id.
            await db_call(
                session_open,
                session_id=session_id,
                identity=identity,
                protocol_version=protocol_version,
                client_name=client.client_info.name if client else "",
                client_version=client.client_info.version if client else "",
                client_capabilities=capabilities,
            )
            return [(SESSION_HEADER, session_id.encode())]

        await self.app({**scope, INITIALIZED_HOOK_KEY: opened}, receive, send)


def _as_json(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _narrowed(identity: Identity, session_scopes: frozenset[str]) -> Identity:
    return replace(identity, scopes=identity.scopes & session_scopes)

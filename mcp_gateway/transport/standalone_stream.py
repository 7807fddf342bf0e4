"""The standalone ``GET /mcp`` stream of a handshake-era session: what a client hears outside any
request (``notifications/tools/list_changed``, ``.../prompts/list_changed``,
``.../resources/list_changed``, and ``notifications/resources/updated`` for the URIs the session
subscribed to), whichever worker holds the stream and whichever made the change.

Changes reach every worker through the change log's ``NOTIFY`` (``list_changes``, ``changes``); this
module is the sink that turns them into SSE frames for this worker's streams. Each logged change's
id, sealed for the stream's tenant (``event_ids``: the log is one sequence for every tenant), is the
frame's SSE id, and the stream opens with a priming frame carrying the newest id, so a
client that reconnects with ``Last-Event-ID``, to this worker or another (a worker killed, a
deploy), is told exactly what it missed (``changes.change_log_since``; "everything changed" when the
log cannot say: a spurious notification costs one refetch, a missed one leaves a client stale).

A stream lives only as long as what authenticated it: when the session ends, its token is revoked
or refreshed, or its person, tenant or client changes (``identity_cache``'s notifications, heard on
the same connection), the stream is ended cleanly; the client's reconnection authenticates afresh.
One stream per session on a worker (a new one replaces the old, as a reconnecting client's is), at
most ``MCP_STREAMS_PER_PERSON`` per person on a worker, and each is ended when its client stops
reading (``MAX_BUFFERED_FRAMES``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import DatabaseError
from django.utils import timezone
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from core.asgi_http import request_header
from core.conf import gatehouse_settings
from core.db import db_call
from core.identity import Identity
from core.models import AuditAction, AuditOutcome
from mcp_gateway.kernel.changes import Change, change_log_latest, change_log_since
from mcp_gateway.kernel.event_ids import event_id_open, event_id_seal
from mcp_gateway.kernel.metrics import STREAMS_OPEN
from mcp_gateway.kernel.sessions import LiveSession, session_needs_touch, session_touch
from mcp_gateway.models import ChangeKind
from mcp_gateway.pipeline.list_changes import ALL_EVENTS, ListChanges
from mcp_gateway.pipeline.resource_subscriptions import resource_subscribers, resource_subscriptions_of
from mcp_gateway.pipeline.stream_bounds import STREAMS_PER_PERSON, PersonStreams, stream_refused
from mcp_gateway.transport.envelope import jsonrpc_error
from mcp_gateway.transport.response_stream import PING_SECONDS, SSE_HEADERS
from oauth.edge_refusals import edge_audit

logger = logging.getLogger(__name__)

LAST_EVENT_ID = b"last-event-id"
# Frames a stream may have queued unread before it is ended (its client reconnects and resumes).
MAX_BUFFERED_FRAMES = 256
# How long a client waits before reconnecting to a stream that ended (SSE ``retry``).
RETRY_MS = 1000

NOT_ACCEPTABLE = "Not Acceptable: the standalone stream is text/event-stream; accept it."
UNAVAILABLE = "Change notifications are unavailable right now; retry shortly."
# The audit row's target for what the stream refuses (its requests have no JSON-RPC method).
STREAM_TARGET = "GET /mcp"

_METHODS: dict[type, str] = {
    ToolsListChanged: "notifications/tools/list_changed",
    PromptsListChanged: "notifications/prompts/list_changed",
    ResourcesListChanged: "notifications/resources/list_changed",
}


def _frame(event: ServerEvent, event_id: str | None) -> bytes:
    if isinstance(event, ResourceUpdated):
        message: dict[str, Any] = {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": event.uri},
        }
    else:
        message = {"jsonrpc": "2.0", "method": _METHODS[type(event)]}
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: message\ndata: {data}\n\n".encode()


def _last_event_id(scope: Scope, *, tenant_id: int) -> int | None:
    """The log position of the client's ``Last-Event-ID``; -1 (nothing can be said of it) for a
    value this server never sent this tenant (``event_ids``)."""
    value = request_header(scope, LAST_EVENT_ID)
    if value is None or value == "":
        return None
    position = event_id_open(tenant_id=tenant_id, value=value)
    return -1 if position is None else position


def _sealed(change: Change) -> str | None:
    if change.id is None:
        return None
    return event_id_seal(tenant_id=change.tenant_id, change_id=change.id)


@dataclass(eq=False)
class _Stream:
    session_id: str
    identity: Identity
    frames: asyncio.Queue[bytes | None] = field(default_factory=lambda: asyncio.Queue(MAX_BUFFERED_FRAMES))
    # Logged changes up to this id were sent (or predate the stream): a duplicate is skipped.
    sent_up_to: int = 0
    ended: bool = False

    def put(self, frame: bytes | None) -> None:
        if self.ended:
            return
        if frame is None:
            self.ended = True
        try:
            self.frames.put_nowait(frame)
        except asyncio.QueueFull:
            logger.warning("Standalone stream of session %s… stopped reading; ending it", self.session_id[:8])
            self.ended = True
            # Room for the end: the oldest unsent frame goes, the client resumes from what it had.
            self.frames.get_nowait()
            self.frames.put_nowait(None)

    def end(self) -> None:
        self.put(None)


class StandaloneStreams:
    """This worker's standalone streams, by session; a sink of ``ListChanges``."""

    def __init__(self, *, changes: ListChanges) -> None:
        self.changes = changes
        changes.sinks.append(self)
        self._by_session: dict[str, _Stream] = {}
        self._per_person = PersonStreams()
        _ALL.add(self)

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, *, session: LiveSession, identity: Identity
    ) -> None:
        accept = (request_header(scope, b"accept") or "").lower()
        if "text/event-stream" not in accept and "*/*" not in accept:
            await jsonrpc_error(send, status=406, code=-32600, message=NOT_ACCEPTABLE)
            return
        replaced = self._by_session.get(session.id)
        if replaced is None and self._per_person.full(identity=identity):
            refused = await stream_refused(
                identity=identity,
                session_id=session.id,
                target=STREAM_TARGET,
                reason=STREAMS_PER_PERSON,
                limit=gatehouse_settings.MCP_STREAMS_PER_PERSON,
            )
            await jsonrpc_error(
                send, status=refused.http_status, code=refused.jsonrpc_code, message=refused.message
            )
            return
        try:
            await self.changes.ready()
        except MCPError:
            await _unavailable(send, identity=identity, session=session, error="ListenerUnavailable")
            return
        if replaced is not None:
            replaced.end()
        stream = _Stream(session_id=session.id, identity=identity)
        # Registered before the log is read: a change committed meanwhile is queued, not lost.
        self._by_session[session.id] = stream
        STREAMS_OPEN.inc()
        try:
            with self._per_person.holding(identity=identity):
                await self._stream(scope, receive, send, stream, session)
        finally:
            STREAMS_OPEN.dec()
            if self._by_session.get(session.id) is stream:
                del self._by_session[session.id]

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, stream: _Stream, session: LiveSession
    ) -> None:
        tenant_id = stream.identity.tenant_id
        after = _last_event_id(scope, tenant_id=tenant_id)
        try:
            latest = await db_call(change_log_latest)
            missed: list[Change] | None = []
            if after is not None:
                missed = None if after < 0 or after > latest else await self._missed(stream, after)
        except DatabaseError:
            # Before the response starts: the endpoint's own error, and the client retries.
            logger.warning("A standalone stream was refused: the change log could not be read", exc_info=True)
            await _unavailable(send, identity=stream.identity, session=session, error="DatabaseError")
            return
        stream.sent_up_to = latest
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        # The priming frame (an id, no data): where a client that has heard nothing yet resumes.
        priming = event_id_seal(tenant_id=tenant_id, change_id=latest)
        opening = f"retry: {RETRY_MS}\nid: {priming}\nevent: message\ndata: \n\n".encode()
        if missed is None:
            opening += b"".join(_frame(event, None) for event in ALL_EVENTS)
        else:
            opening += b"".join(_frame(event, _sealed(change)) for change, event in self._frames_of(missed))
        await send({"type": "http.response.body", "body": opening, "more_body": True})
        writer = asyncio.create_task(self._write(send, stream, session))
        gone = asyncio.create_task(_disconnected(receive))
        try:
            await asyncio.wait({writer, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (writer, gone):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer
        if writer.done() and not writer.cancelled() and writer.exception() is None:
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _missed(self, stream: _Stream, after: int) -> list[Change] | None:
        changes = await db_call(change_log_since, tenant_id=stream.identity.tenant_id, after_id=after)
        if changes is None or not any(change.kind == ChangeKind.RESOURCE for change in changes):
            return changes
        subscribed = await db_call(resource_subscriptions_of, session_id=stream.session_id)
        return [
            change for change in changes if change.kind != ChangeKind.RESOURCE or change.uri in subscribed
        ]

    def _frames_of(self, changes: list[Change]) -> list[tuple[Change, ServerEvent]]:
        return [(change, event) for change in changes for event in self.changes.change_events(change)]

    async def _write(self, send: Send, stream: _Stream, session: LiveSession) -> None:
        last_seen = session.last_seen
        while True:
            try:
                frame = await asyncio.wait_for(stream.frames.get(), PING_SECONDS)
            except TimeoutError:
                frame = b": ping\n\n"
                # An open stream is a session in use: it must not be swept as idle.
                now = timezone.now()
                if session_needs_touch(session=replace(session, last_seen=last_seen), now=now):
                    await db_call(session_touch, session_id=session.id, now=now)
                    last_seen = now
            if frame is None:
                return
            await send({"type": "http.response.body", "body": frame, "more_body": True})

    # The sink's side: ``ListChanges`` calls these for every change this worker hears.

    async def changed(self, change: Change, events: tuple[ServerEvent, ...]) -> None:
        streams = [s for s in self._by_session.values() if s.identity.tenant_id == change.tenant_id]
        if not streams:
            return
        if change.kind == ChangeKind.RESOURCE:
            subscribed = await db_call(
                resource_subscribers, session_ids=[s.session_id for s in streams], uri=change.uri
            )
            streams = [s for s in streams if s.session_id in subscribed]
        frames = [_frame(event, _sealed(change)) for event in events]
        for stream in streams:
            if change.id is not None:
                if change.id <= stream.sent_up_to:
                    continue
                stream.sent_up_to = change.id
            for frame in frames:
                stream.put(frame)

    async def identity_changed(self, *, kind: str, key: int | str) -> None:
        for stream in list(self._by_session.values()):
            identity = stream.identity
            resting_on = {
                "session": stream.session_id,
                "token": identity.token_id,
                "user": identity.user_id,
                "tenant": identity.tenant_id,
                "application": identity.application_id,
            }
            if resting_on.get(kind) != key:
                continue
            if kind == "user":
                # A role or membership changed: what the person may list may have too.
                for event in ALL_EVENTS:
                    stream.put(_frame(event, None))
            stream.end()

    async def everything_changed(self) -> None:
        """The worker's listener was lost: changes may have gone unheard. Each stream is told its
        lists changed and is ended; the client's reconnection replays the log from its last id."""
        for stream in list(self._by_session.values()):
            for event in ALL_EVENTS:
                stream.put(_frame(event, None))
            stream.end()

    def end_session(self, session_id: str) -> None:
        """The session ended on this worker (``DELETE``): no need to wait for the notification."""
        stream = self._by_session.get(session_id)
        if stream is not None:
            stream.end()

    def end_all(self) -> None:
        """Shutting down: every stream ends cleanly, and its client reconnects to another worker."""
        for stream in list(self._by_session.values()):
            stream.end()

    def __len__(self) -> int:
        return len(self._by_session)


_ALL: weakref.WeakSet[StandaloneStreams] = weakref.WeakSet()


def standalone_streams_end_all() -> None:
    """The server is shutting down (an ASGI lifespan's shutdown: uvicorn, granian): end every
    standalone stream cleanly, so clients reconnect to another worker at once and resume."""
    for streams in list(_ALL):
        streams.end_all()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _unavailable(send: Send, *, identity: Identity, session: LiveSession, error: str) -> None:
    """503 -32005 before the response starts, with the row the failsafe writes for a failure (the
    audit trail spools it when the database is what failed)."""
    await edge_audit(
        action=AuditAction.SERVER_ERROR,
        outcome=AuditOutcome.ERROR,
        identity=identity,
        session_id=session.id,
        target=STREAM_TARGET,
        detail={"error": error, "code": -32005},
    )
    await jsonrpc_error(send, status=503, code=-32005, message=UNAVAILABLE)

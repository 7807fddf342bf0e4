"""This worker's memory of what the hot-path query answered for a bearer token, so that a token used
again costs no SQL, and a revocation still stops the next request.

``transport.bearer.identity_from_bearer`` asks the database once per token (and session) and keeps the row
here for at most ``MCP_IDENTITY_CACHE_SECONDS``, never past the token's own expiry, in a bounded
LRU keyed by the token's checksum (never the token). Every check (expiry, resource, active user
and tenant, membership, role) still runs on each request against the kept row; only the query is
saved.

What the row depends on can change in another process: a revoked or refreshed token, a removed
membership or changed role, a deactivated user or tenant, a deleted client, an ended session or a
new log level. Triggers (migration 0013) announce each such change with ``NOTIFY`` on ``CHANNEL``
once it commits, naming what changed (``{"kind": "user", "id": 7}``), and each worker's listener
forgets the rows that depend on it.

A notification travels on its own, so by itself it could arrive after the next request: a kept
answer is served only after a round trip on the listener connection (an empty query: a comment, no
statement) that left after the request arrived. PostgreSQL sends a connection every notification
committed before it answers, so every change committed before the request is heard before its
answer is chosen: "revocation stops the next request" holds exactly. Requests arriving together
share one round trip.

Safe by default: a hit is served only while the listener is connected on this event loop. Not
started yet, lost, reconnecting, or on SQLite (no ``NOTIFY``): every request queries. After a
reconnect the cache starts empty, since notifications may have been missed meanwhile. A row read
while any change was being heard is not kept (``generation``), so a query that raced a revocation
cannot bring the old answer back.

What is left (docs/benchmarks.md): a request already past authentication when the change commits
is answered as before it, as without the cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from core.conf import gatehouse_settings
from core.db import psycopg_connect_kwargs

logger = logging.getLogger(__name__)

CHANNEL = "gatehouse_identity_changed"
# What a notification may name, and the tag an entry carries for each.
KINDS = frozenset({"token", "user", "tenant", "application", "session"})
# Entries per worker: a token and session pair each; past this the least recently used go.
MAX_ENTRIES = 10_000
LISTEN_RETRY_SECONDS = 2.0
# The round trip: a comment is an empty query to PostgreSQL (no statement runs), and it names the
# connection in pg_stat_activity.
CAUGHT_UP = f"-- {CHANNEL}: caught up"
CAUGHT_UP_TIMEOUT_SECONDS = 1.0

Tag = tuple[str, int | str]


@dataclass(frozen=True, slots=True)
class _Entry:
    value: Any
    deadline: float
    tags: frozenset[Tag]


class IdentityCache:
    """An LRU of hot-path answers, trusted only while its ``LISTEN`` connection is up."""

    def __init__(self, *, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._tagged: dict[Tag, set[Hashable]] = {}
        # Bumped by every change heard: a query begun before it may have read the old answer.
        self.generation = 0
        self._pgconn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lost: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._off = False
        # The round trip on its way, and the one the requests that came after it wait for.
        self._sent: asyncio.Future[bool] | None = None
        self._next: asyncio.Future[bool] | None = None

    def start(self) -> None:
        """Start listening on the running loop, once (cheap to call on every request)."""
        if self._task is not None or self._off:
            return
        if gatehouse_settings.MCP_IDENTITY_CACHE_SECONDS <= 0 or connection.vendor != "postgresql":
            self._off = True
            return
        self._task = asyncio.get_running_loop().create_task(self._listen_forever())

    async def get(self, key: Hashable) -> Any:
        """The kept answer for ``key``, or None (never while the listener is not known to be up),
        once every change committed before this call has been heard."""
        if key not in self._entries or not self._trusted() or not await self._synced():
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.deadline <= time.monotonic():
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return entry.value

    def put(
        self, key: Hashable, value: Any, *, generation: int, expires: datetime, tags: frozenset[Tag]
    ) -> None:
        """Keep ``value``, read by a query begun at ``generation``, until ``expires`` at the latest."""
        if generation != self.generation or not self._trusted():
            return
        seconds = min(
            gatehouse_settings.MCP_IDENTITY_CACHE_SECONDS, (expires - timezone.now()).total_seconds()
        )
        if seconds <= 0:
            return
        self._remove(key)
        self._entries[key] = _Entry(value=value, deadline=time.monotonic() + seconds, tags=tags)
        for tag in tags:
            self._tagged.setdefault(tag, set()).add(key)
        while len(self._entries) > self.max_entries:
            self._remove(next(iter(self._entries)))

    def forget(self, tag: Tag) -> None:
        """Drop every answer that depends on ``tag`` (heard from a notification, or written here)."""
        self.generation += 1
        for key in self._tagged.pop(tag, set()):
            self._remove(key)

    def clear(self) -> None:
        self.generation += 1
        self._entries.clear()
        self._tagged.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _remove(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        for tag in entry.tags:
            keys = self._tagged.get(tag)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._tagged[tag]

    def _trusted(self) -> bool:
        if self._pgconn is None:
            return False
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def received(self, payload: str) -> None:
        """A ``NOTIFY`` on ``CHANNEL``. What cannot be read forgets everything: it named something."""
        try:
            change = json.loads(payload)
            kind, ident = change["kind"], change["id"]
            if kind not in KINDS or isinstance(ident, bool) or not isinstance(ident, int | str):
                raise ValueError("wrong kind or id")
        except (ValueError, KeyError, TypeError, RecursionError):
            logger.warning("Unreadable identity change notification; forgetting all: %r", payload[:200])
            self.clear()
            return
        self.forget((kind, ident))

    async def _synced(self) -> bool:
        """Whether every change committed before this call has been heard (False: the connection
        went meanwhile). One round trip at a time; a caller that came after it left waits for the
        next, as the change it must hear may have committed after that one left."""
        waiting = self._next
        if waiting is None:
            waiting = self._next = asyncio.get_running_loop().create_future()
            if self._sent is None:
                self._send()
        try:
            async with asyncio.timeout(CAUGHT_UP_TIMEOUT_SECONDS):
                return await asyncio.shield(waiting)
        except TimeoutError:
            # A connection that stopped answering may also have stopped hearing: start afresh.
            logger.warning("Identity cache notification connection stopped answering; reconnecting")
            self._untrust()
            return False

    def _send(self) -> None:
        self._sent, self._next = self._next, None
        try:
            self._pgconn.send_query(CAUGHT_UP.encode())
            if self._pgconn.flush() != 0:
                raise OSError("the listener connection would block")
        except Exception:
            logger.warning("Identity cache could not reach its notification connection", exc_info=True)
            self._untrust()

    def _drain(self) -> None:
        """Hear every notification that has reached this worker's socket, and the answer to the
        round trip on its way, if it came (the notifications before it come first)."""
        pgconn = self._pgconn
        if pgconn is None:
            return
        try:
            pgconn.consume_input()
            while (notify := pgconn.notifies()) is not None:
                self.received(notify.extra.decode(errors="replace"))
            if self._sent is None or pgconn.is_busy():
                return
            while pgconn.get_result() is not None:
                pass
        except Exception:
            # The connection is gone (or unreadable): trust nothing until it is back.
            logger.warning("Identity cache lost its notification connection", exc_info=True)
            self._untrust()
            return
        done, self._sent = self._sent, None
        done.set_result(True)
        if self._next is not None:
            self._send()

    def _untrust(self) -> None:
        self._pgconn = None
        self.clear()
        for waiting in (self._sent, self._next):
            if waiting is not None and not waiting.done():
                waiting.set_result(False)
        self._sent = self._next = None
        if self._lost is not None:
            self._lost.set()

    async def _listen_forever(self) -> None:
        import psycopg

        loop = asyncio.get_running_loop()
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(**psycopg_connect_kwargs()) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    socket = conn.pgconn.socket
                    self._lost = asyncio.Event()
                    loop.add_reader(socket, self._drain)
                    try:
                        # Whatever was kept before this connection may have missed a change.
                        self.clear()
                        self._loop, self._pgconn = loop, conn.pgconn
                        await self._lost.wait()
                    finally:
                        loop.remove_reader(socket)
                        self._untrust()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Identity cache notifications lost their database connection; reconnecting")
            await asyncio.sleep(LISTEN_RETRY_SECONDS)


identity_cache = IdentityCache()

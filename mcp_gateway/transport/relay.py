"""Carry a client's answer to the worker that is waiting for it.

A tool that asks the client something mid-call (``sampling/createMessage``,
``elicitation/create``) writes the request onto its own SSE response and waits. The client answers
with a separate POST, which the load balancer may hand to any worker. Each worker keeps its waiting
requests here; an answer that arrives elsewhere is published on a PostgreSQL channel
(``LISTEN``/``NOTIFY``) that every worker listens on, and the worker holding the waiter takes it.
``notifications/cancelled`` travels the same way, to the worker running the cancelled call.

PostgreSQL is already the one thing every worker shares, so this needs no broker. On the embedded
SQLite database there is only one process, and the local half is all there is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from mcp.shared.exceptions import MCPError
from mcp_types import ErrorData

from core.db import db_call, psycopg_connect_kwargs
from mcp_gateway.models import RelayedMessage

logger = logging.getLogger(__name__)

CHANNEL = "gatehouse_mcp_relay"
# NOTIFY payloads are limited to 8000 bytes; larger answers (a sampled image, say) go through a row.
MAX_INLINE_PAYLOAD = 7000
LISTEN_RETRY_SECONDS = 2.0
LISTEN_WAIT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class _Waiter:
    session_id: str
    future: asyncio.Future[dict[str, Any]]


class LocalRelay:
    """Waiting requests and running calls of this process; enough when there is one process."""

    def __init__(self) -> None:
        self._waiters: dict[str, _Waiter] = {}
        self._calls: dict[tuple[str, str], Callable[[], None]] = {}

    @staticmethod
    def new_request_id() -> str:
        # Unguessable, so no other session can answer (or forge an answer to) someone else's request.
        return f"gatehouse-{secrets.token_urlsafe(16)}"

    async def expect(self, *, request_id: str, session_id: str) -> asyncio.Future[dict[str, Any]]:
        """Register interest in the answer to ``request_id`` before the request is sent."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = _Waiter(session_id, future)
        return future

    def forget(self, *, request_id: str) -> None:
        self._waiters.pop(request_id, None)

    def call_started(self, *, session_id: str, request_id: str | int, cancel: Callable[[], None]) -> None:
        self._calls[(session_id, _key(request_id))] = cancel

    def call_finished(self, *, session_id: str, request_id: str | int) -> None:
        self._calls.pop((session_id, _key(request_id)), None)

    async def answer(self, *, session_id: str, message: dict[str, Any]) -> None:
        """A client's JSON-RPC response to one of our requests, from a POST on ``session_id``."""
        if not self._answer_locally(session_id, message):
            await self._publish({"kind": "answer", "session": session_id, "message": message})

    async def cancel(self, *, session_id: str, request_id: str | int) -> None:
        """The client's ``notifications/cancelled`` for one of its in-flight calls."""
        if not self._cancel_locally(session_id, request_id):
            await self._publish({"kind": "cancel", "session": session_id, "request_id": request_id})

    def _answer_locally(self, session_id: str, message: dict[str, Any]) -> bool:
        request_id = message.get("id")
        if not isinstance(request_id, str) or (waiter := self._waiters.get(request_id)) is None:
            return False
        if waiter.session_id != session_id:
            # Only the session that was asked may answer; anything else is dropped, loudly.
            logger.warning("Ignored an answer to %s from another session", request_id)
            return True
        self._waiters.pop(request_id, None)
        if waiter.future.done():
            return True
        error = message.get("error")
        if isinstance(error, dict):
            try:
                data = ErrorData.model_validate(error)
            except ValueError:
                data = ErrorData(code=-32603, message="The client answered with a malformed error.")
            waiter.future.set_exception(MCPError.from_error_data(data))
        else:
            result = message.get("result")
            waiter.future.set_result(result if isinstance(result, dict) else {})
        return True

    def _cancel_locally(self, session_id: str, request_id: str | int) -> bool:
        cancel = self._calls.get((session_id, _key(request_id)))
        if cancel is None:
            return False
        cancel()
        return True

    async def _publish(self, envelope: dict[str, Any]) -> None:
        # One process: nobody else could be waiting.
        logger.info("Dropped a %s for a request no call is waiting on", envelope["kind"])


class PostgresRelay(LocalRelay):
    """The local relay plus a ``LISTEN`` connection per worker, for answers that land elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self._listening = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None

    async def expect(self, *, request_id: str, session_id: str) -> asyncio.Future[dict[str, Any]]:
        # Listen before asking, so an answer can never arrive before anyone hears it.
        await self.listening()
        return await super().expect(request_id=request_id, session_id=session_id)

    def call_started(self, *, session_id: str, request_id: str | int, cancel: Callable[[], None]) -> None:
        super().call_started(session_id=session_id, request_id=request_id, cancel=cancel)
        self._start()

    async def listening(self) -> None:
        self._start()
        try:
            async with asyncio.timeout(LISTEN_WAIT_SECONDS):
                await self._listening.wait()
        except TimeoutError:
            raise MCPError(code=-32005, message="The message relay between workers is unavailable.") from None

    def _start(self) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(self._listen_forever())

    async def _listen_forever(self) -> None:
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(**psycopg_connect_kwargs()) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    async for notify in conn.notifies():
                        await self._received(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("The MCP message relay lost its database connection; reconnecting")
            self._listening.clear()
            await asyncio.sleep(LISTEN_RETRY_SECONDS)

    async def _received(self, payload: str) -> None:
        try:
            envelope = json.loads(payload)
            if envelope["kind"] == "cancel":
                self._cancel_locally(envelope["session"], envelope["request_id"])
                return
            message = envelope.get("message")
            if message is None:
                # Too big to travel inline: it waits in a row, for the worker that holds the waiter.
                if envelope.get("id") not in self._waiters:
                    return
                message = await db_call(_take_row, envelope["ref"])
                if message is None:
                    return
            self._answer_locally(envelope["session"], message)
        except Exception:
            logger.exception("Dropped a malformed relay message")

    async def _publish(self, envelope: dict[str, Any]) -> None:
        await db_call(_notify, envelope)


def _notify(envelope: dict[str, Any]) -> None:
    payload = json.dumps(envelope, separators=(",", ":"))
    if len(payload.encode()) > MAX_INLINE_PAYLOAD:
        message = envelope.pop("message")
        envelope["id"] = message.get("id")
        envelope["ref"] = RelayedMessage.objects.create(body=message).pk
        payload = json.dumps(envelope, separators=(",", ":"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


def _take_row(pk: int) -> dict[str, Any] | None:
    row = RelayedMessage.objects.filter(pk=pk).first()
    if row is None:
        return None
    row.delete()
    return row.body if isinstance(row.body, dict) else None


def _key(request_id: str | int) -> str:
    # A client may echo 7 as "7"; both name the same call.
    return str(request_id)


def relay_build() -> LocalRelay:
    return PostgresRelay() if connection.vendor == "postgresql" else LocalRelay()

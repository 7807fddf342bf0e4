"""One POST's response as the SDK kernel's back-channel, shared by both protocol eras' exchanges.

Each request is served on the SDK's kernel (``mcp.server.runner.serve_one``) in the POST's own task,
with a ``DispatchContext`` (``RequestChannel``) whose notifications, and on handshake-era sessions
server-to-client requests, travel on that POST's response (``ResponseStream``). The response stays
plain JSON unless something has to be streamed first, and becomes SSE only then. While the kernel
works, ``client_watch`` keeps a quiet response alive through proxies and cancels the work when the
client leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ProgressToken, RequestId
from starlette.requests import Request
from starlette.types import Message, Receive, Send

from core.asgi_http import send_json
from core.errors import Timeout
from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
from mcp_gateway.transport.relay import LocalRelay

PING_SECONDS = 15.0
# A quiet response's first ping, which starts it (as SSE). Early, because a client may hold other
# requests until this one's response starts: the official SDK's OAuth client keeps a lock from
# sending a request until its response's headers arrive, so a long quiet call would otherwise hold
# back the client's other calls, its answers to elicitation and its own cancellation for 15 s.
# Calls answered sooner stay plain JSON.
FIRST_PING_SECONDS = 1.0
# The watch starts this long after the work does. Most calls are answered well before: they pay a
# timer instead of a task, which is cheaper (docs/benchmarks.md). A client that leaves sooner is still
# seen: its disconnect waits in the server's queue for the watch's first receive().
WATCH_AFTER_SECONDS = 0.05
CLIENT_ANSWER_SECONDS = 300.0

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

CLIENT_DID_NOT_ANSWER = "The client did not answer the server's request in time."


def _sse_event(message: Mapping[str, Any]) -> bytes:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    return f"event: message\ndata: {data}\n\n".encode()


class ResponseStream:
    """The HTTP response to one POST: plain JSON unless something has to be streamed first."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = asyncio.Lock()
        self.headers: list[tuple[bytes, bytes]] = []
        self.committed = False
        self.closed = False
        # Not started by a ping: a response whose headers are only known at the end (initialize's
        # session id) waits for its answer.
        self.hold = False
        self.first_ping_seconds = FIRST_PING_SECONDS

    async def event(self, message: Mapping[str, Any]) -> None:
        await self._write(_sse_event(message))

    async def ping(self) -> None:
        if self.hold and not self.committed:
            return
        await self._write(b": ping\n\n")

    async def _write(self, chunk: bytes) -> None:
        async with self._lock:
            if self.closed:
                return
            if not self.committed:
                self.committed = True
                await self._send(
                    {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + self.headers}
                )
            await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def finish(self, message: Mapping[str, Any] | None, *, status: int = 200) -> None:
        """End the response with ``message`` (None: no answer at all). ``status`` applies only to a
        plain JSON answer: once streaming, the status has gone out as 200."""
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            if self.committed:
                body = b"" if message is None else _sse_event(message)
                await self._send({"type": "http.response.body", "body": body, "more_body": False})
                return
            if message is None:
                await self._send({"type": "http.response.start", "status": 204, "headers": self.headers})
                await self._send({"type": "http.response.body", "body": b""})
                return
            await send_json(self._send, status=status, body=dict(message), headers=self.headers)


class RequestChannel:
    """The SDK's ``DispatchContext`` for one inbound request: its back-channel is the response.

    Server-to-client requests need a session for the answer to come back on (``relay``); without
    one (2026-07-28, which has no back-channel) the channel carries notifications only."""

    def __init__(
        self,
        *,
        request: Request,
        request_id: RequestId,
        progress_token: ProgressToken | None,
        stream: ResponseStream,
        relay: LocalRelay | None,
        session_id: str | None,
    ) -> None:
        self.request_id = request_id
        self.progress_token = progress_token
        self.message_metadata: MessageMetadata = ServerMessageMetadata(request_context=request)
        self.transport = TransportContext(
            kind="streamable-http", can_send_request=session_id is not None, headers=request.headers
        )
        self._cancel_requested: anyio.Event | None = None
        self._stream = stream
        self._relay = relay
        self._session_id = session_id

    @property
    def cancel_requested(self) -> anyio.Event:
        # Made on demand: few handlers look, and an anyio Event costs a backend lookup per request.
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    @property
    def can_send_request(self) -> bool:
        # An answer needs a session to come back on, and a response still open to ask on.
        return self._session_id is not None and self._relay is not None and not self._stream.closed

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if self._session_id is None or self._relay is None or not self.can_send_request:
            raise NoBackChannelError(method)
        request_id = self._relay.new_request_id()
        answer = await self._relay.expect(request_id=request_id, session_id=self._session_id)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            await self._stream.event(message)
            async with asyncio.timeout((opts or {}).get("timeout") or CLIENT_ANSWER_SECONDS):
                return await answer
        except TimeoutError:
            await self.notify("notifications/cancelled", {"requestId": request_id, "reason": "timed out"})
            raise as_mcp_error(Timeout(CLIENT_DID_NOT_ANSWER)) from None
        finally:
            self._relay.forget(request_id=request_id)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self._stream.event(message)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


@dataclass
class ClientWatch:
    """What ``client_watch`` yields: ``cancel`` stops the work as the client leaving does (the
    relay calls it for a ``notifications/cancelled``); ``cancelled`` says whether either happened."""

    task: asyncio.Task[Any]
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        self.cancelled = True
        self.task.cancel()


@contextlib.asynccontextmanager
async def client_watch(receive: Receive, stream: ResponseStream) -> AsyncIterator[ClientWatch]:
    """Serve the block's work under watch: pings while the response is quiet, and cancellation
    of the block when the client goes away before the response is finished. A cancellation that
    came from the watch ends the block quietly (the protocol sends no response for it)."""
    task = asyncio.current_task()
    assert task is not None
    watch = ClientWatch(task)
    loop = asyncio.get_running_loop()
    watcher: asyncio.Task[None] | None = None

    def start() -> None:
        nonlocal watcher
        watcher = loop.create_task(_watch(receive, stream, watch.cancel))

    starter = loop.call_later(WATCH_AFTER_SECONDS, start)
    try:
        yield watch
    except asyncio.CancelledError:
        if not watch.cancelled:
            raise
        task.uncancel()
    finally:
        starter.cancel()
        if watcher is not None:
            watcher.cancel()


async def _watch(receive: Receive, stream: ResponseStream, cancel: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    pinger: asyncio.TimerHandle | None = None

    pings: set[asyncio.Task[None]] = set()

    def ping() -> None:
        nonlocal pinger
        task = loop.create_task(stream.ping())
        pings.add(task)
        task.add_done_callback(pings.discard)
        pinger = loop.call_later(PING_SECONDS, ping)

    pinger = loop.call_later(max(stream.first_ping_seconds - WATCH_AFTER_SECONDS, 0.0), ping)
    try:
        while True:
            event: Message = await receive()
            if event["type"] == "http.disconnect":
                if not stream.closed:
                    cancel()
                return
    finally:
        pinger.cancel()


async def accepted(send: Send) -> None:
    await send({"type": "http.response.start", "status": 202, "headers": []})
    await send({"type": "http.response.body", "body": b""})

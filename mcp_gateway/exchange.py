"""Serve one handshake-era POST (protocol 2024-11-05 to 2025-11-25) on the SDK's server kernel.

The SDK's streamable HTTP transports keep a session in one process's memory; its stateless mode
builds a transport, a server session and a task group for every request, and offers no
back-channel. Gatehouse keeps what a session is in PostgreSQL (``asgi.sessions``) and hands each
POST straight to the SDK's kernel (``serve_one``) with a channel of its own: notifications and
server-to-client requests travel on that POST's response, which becomes an SSE stream only once
there is something to stream, and the client's answer comes back through the relay (``relay``)
whichever worker it reaches.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import serve_one
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import (
    cancelled_request_id_from_params,
    handler_exception_to_error_data,
    progress_token_from_params,
)
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    ClientCapabilities,
    ErrorData,
    Implementation,
    InitializeRequestParams,
    ProgressToken,
    RequestId,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from core.asgi_http import request_header, send_json
from core.errors import Timeout
from mcp_gateway.asgi.envelope import jsonrpc_error
from mcp_gateway.asgi.scope_keys import INITIALIZED_HOOK_KEY, MESSAGE_KEY, SESSION_KEY
from mcp_gateway.jsonrpc_errors import as_mcp_error
from mcp_gateway.relay import LocalRelay
from mcp_gateway.sessions import LiveSession

logger = logging.getLogger(__name__)

# What the session middleware leaves under ``INITIALIZED_HOOK_KEY`` on an ``initialize`` POST.
InitializedHook = Callable[[InitializeRequestParams | None, str], Awaitable[list[tuple[bytes, bytes]]]]

PING_SECONDS = 15.0
CLIENT_ANSWER_SECONDS = 300.0

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

NOT_ACCEPTABLE = "Not Acceptable: the client must accept both application/json and text/event-stream."
UNSUPPORTED_MEDIA = "Unsupported Media Type: the body must be application/json."
NO_SESSION_FOR_ANSWER = "An answer to a server request must name the session that was asked."
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

    async def event(self, message: Mapping[str, Any]) -> None:
        await self._write(_sse_event(message))

    async def ping(self) -> None:
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

    async def finish(self, message: Mapping[str, Any] | None) -> None:
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
            await send_json(self._send, status=200, body=dict(message), headers=self.headers)


class RequestChannel:
    """The SDK's ``DispatchContext`` for one inbound request: its back-channel is the response."""

    def __init__(
        self,
        *,
        request: Request,
        request_id: RequestId,
        progress_token: ProgressToken | None,
        stream: ResponseStream,
        relay: LocalRelay,
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
        return self._session_id is not None and not self._stream.closed

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if self._session_id is None or not self.can_send_request:
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


def _client_params(session: LiveSession) -> InitializeRequestParams | None:
    try:
        return InitializeRequestParams(
            protocol_version=session.protocol_version,
            capabilities=ClientCapabilities.model_validate(session.client_capabilities),
            client_info=Implementation(name=session.client_name, version=session.client_version),
        )
    except ValidationError:
        return None


def _error_data(error: BaseException) -> ErrorData:
    data = handler_exception_to_error_data(error)
    if data is None:
        data = as_mcp_error(error).error
    return data


def _accepts_both(scope: Scope) -> bool:
    accept = (request_header(scope, b"accept") or "").lower()
    return ("application/json" in accept or "*/*" in accept) and (
        "text/event-stream" in accept or "*/*" in accept
    )


def _is_json(scope: Scope) -> bool:
    content_type = request_header(scope, b"content-type") or ""
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


class HandshakeEraApp:
    """POSTs of handshake-era sessions: requests, notifications and answers to our own requests."""

    def __init__(self, *, server: Server[Any], relay: LocalRelay) -> None:
        self.server = server
        self.relay = relay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _is_json(scope):
            await jsonrpc_error(send, status=415, code=-32600, message=UNSUPPORTED_MEDIA)
            return
        message: dict[str, Any] = scope[MESSAGE_KEY]
        session: LiveSession | None = scope.get(SESSION_KEY)
        if "method" not in message:
            await self._answer(session, message, send)
            return
        if "id" not in message:
            await self._notification(session, message, send)
            return
        if not _accepts_both(scope):
            await jsonrpc_error(send, status=406, code=-32600, message=NOT_ACCEPTABLE)
            return
        await self._request(scope, receive, send, session, message)

    async def _answer(self, session: LiveSession | None, message: dict[str, Any], send: Send) -> None:
        if session is None:
            await jsonrpc_error(send, status=400, code=-32600, message=NO_SESSION_FOR_ANSWER)
            return
        await self.relay.answer(session_id=session.id, message=message)
        await _accepted(send)

    async def _notification(self, session: LiveSession | None, message: dict[str, Any], send: Send) -> None:
        if session is not None and message["method"] == "notifications/cancelled":
            request_id = cancelled_request_id_from_params(message.get("params"))
            if request_id is not None:
                await self.relay.cancel(session_id=session.id, request_id=request_id)
        # Other notifications (initialized, roots changed, progress on our requests) need nothing
        # kept: a session is ready as soon as it exists.
        await _accepted(send)

    async def _request(
        self, scope: Scope, receive: Receive, send: Send, session: LiveSession | None, message: dict[str, Any]
    ) -> None:
        method: str = message["method"]
        params: Mapping[str, Any] | None = message.get("params")
        request_id: RequestId = message["id"]
        stream = ResponseStream(send)
        channel = RequestChannel(
            request=Request(scope),
            request_id=request_id,
            progress_token=progress_token_from_params(params),
            stream=stream,
            relay=self.relay,
            session_id=session.id if session is not None else None,
        )
        if session is not None:
            connection = Connection(
                channel,
                protocol_version=session.protocol_version,
                session_id=session.id,
                client_params=_client_params(session),
            )
            connection.initialized.set()
        else:
            connection = Connection.for_loop(channel)

        task = asyncio.current_task()
        assert task is not None
        cancelled = False

        def cancel() -> None:
            nonlocal cancelled
            cancelled = True
            task.cancel()

        watcher = asyncio.ensure_future(_watch(receive, stream, cancel))
        if session is not None:
            self.relay.call_started(session_id=session.id, request_id=request_id, cancel=cancel)
        reply: dict[str, Any] | None
        try:
            result = await serve_one(
                self.server, channel, method, params, connection=connection, lifespan_state={}
            )
            reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
            hook: InitializedHook | None = scope.get(INITIALIZED_HOOK_KEY)
            if method == "initialize" and hook is not None:
                stream.headers += await hook(connection.client_params, connection.protocol_version)
        except asyncio.CancelledError:
            if not cancelled:
                raise
            # Cancelled by the client (or it went away): the protocol sends no response for it.
            task.uncancel()
            reply = None
        except Exception as error:
            error_data = _error_data(error).model_dump(exclude_none=True)
            reply = {"jsonrpc": "2.0", "id": request_id, "error": error_data}
        finally:
            watcher.cancel()
            if session is not None:
                self.relay.call_finished(session_id=session.id, request_id=request_id)
        await stream.finish(reply)


async def _watch(receive: Receive, stream: ResponseStream, cancel: Callable[[], None]) -> None:
    """Keep a quiet response alive through proxies, and stop the work when the client leaves."""
    loop = asyncio.get_running_loop()
    pinger: asyncio.TimerHandle | None = None

    pings: set[asyncio.Task[None]] = set()

    def ping() -> None:
        nonlocal pinger
        task = loop.create_task(stream.ping())
        pings.add(task)
        task.add_done_callback(pings.discard)
        pinger = loop.call_later(PING_SECONDS, ping)

    pinger = loop.call_later(PING_SECONDS, ping)
    try:
        while True:
            event: Message = await receive()
            if event["type"] == "http.disconnect":
                if not stream.closed:
                    cancel()
                return
    finally:
        pinger.cancel()


async def _accepted(send: Send) -> None:
    await send({"type": "http.response.start", "status": 202, "headers": []})
    await send({"type": "http.response.body", "body": b""})

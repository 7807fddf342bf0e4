"""Serve one handshake-era POST (protocol 2024-11-05 to 2025-11-25) on the SDK's server kernel.

The SDK's streamable HTTP transports keep a session in one process's memory; its stateless mode
builds a transport, a server session and a task group for every request, and offers no
back-channel. Gatehouse keeps what a session is in PostgreSQL (``transport.sessions``) and hands each
POST straight to the SDK's kernel (``serve_one``) with a channel of its own (``response_stream``,
shared with ``exchange_2026_07_28``): notifications and server-to-client requests travel
on that POST's response, which becomes an SSE stream only once there is something to stream, and
the client's answer comes back through the relay (``relay``) whichever worker it reaches.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import serve_one
from mcp.shared.jsonrpc_dispatcher import (
    cancelled_request_id_from_params,
    handler_exception_to_error_data,
    progress_token_from_params,
)
from mcp_types import (
    ClientCapabilities,
    ErrorData,
    Implementation,
    InitializeRequestParams,
    RequestId,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from core.asgi_http import request_header
from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
from mcp_gateway.kernel.scope_keys import INITIALIZED_HOOK_KEY, MESSAGE_KEY, SESSION_KEY
from mcp_gateway.kernel.sessions import LiveSession
from mcp_gateway.transport.envelope import jsonrpc_error
from mcp_gateway.transport.relay import LocalRelay
from mcp_gateway.transport.response_stream import RequestChannel, ResponseStream, accepted, client_watch

logger = logging.getLogger(__name__)

# What the session middleware leaves under ``INITIALIZED_HOOK_KEY`` on an ``initialize`` POST.
InitializedHook = Callable[[InitializeRequestParams | None, str], Awaitable[list[tuple[bytes, bytes]]]]

NOT_ACCEPTABLE = "Not Acceptable: the client must accept both application/json and text/event-stream."
UNSUPPORTED_MEDIA = "Unsupported Media Type: the body must be application/json."
NO_SESSION_FOR_ANSWER = "An answer to a server request must name the session that was asked."


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
        await accepted(send)

    async def _notification(self, session: LiveSession | None, message: dict[str, Any], send: Send) -> None:
        if session is not None and message["method"] == "notifications/cancelled":
            request_id = cancelled_request_id_from_params(message.get("params"))
            if request_id is not None:
                await self.relay.cancel(session_id=session.id, request_id=request_id)
        # Other notifications (initialized, roots changed, progress on our requests) need nothing
        # kept: a session is ready as soon as it exists.
        await accepted(send)

    async def _request(
        self, scope: Scope, receive: Receive, send: Send, session: LiveSession | None, message: dict[str, Any]
    ) -> None:
        method: str = message["method"]
        params: Mapping[str, Any] | None = message.get("params")
        request_id: RequestId = message["id"]
        stream = ResponseStream(send)
        stream.hold = method == "initialize"
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

        reply: dict[str, Any] | None = None
        async with client_watch(receive, stream) as watch:
            if session is not None:
                self.relay.call_started(session_id=session.id, request_id=request_id, cancel=watch.cancel)
            try:
                result = await serve_one(
                    self.server, channel, method, params, connection=connection, lifespan_state={}
                )
                reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
                hook: InitializedHook | None = scope.get(INITIALIZED_HOOK_KEY)
                if method == "initialize" and hook is not None:
                    stream.headers += await hook(connection.client_params, connection.protocol_version)
            except Exception as error:
                error_data = _error_data(error).model_dump(exclude_none=True)
                reply = {"jsonrpc": "2.0", "id": request_id, "error": error_data}
            finally:
                if session is not None:
                    self.relay.call_finished(session_id=session.id, request_id=request_id)
        # Cancelled by the client (or it went away): the protocol sends no response for it.
        await stream.finish(None if watch.cancelled else reply)

"""Serve one 2026-07-28 POST on the SDK's server kernel, as ``exchange_handshake_era`` does for the
handshake era.

A 2026-07-28 request stands alone: no handshake, no session, its version and client in its own
``_meta``. The SDK serves such POSTs through its session manager (``handle_modern_request``), which
costs a task group, a memory stream and a second task per request; here each POST goes straight
to the kernel (``serve_one``) in its own task, on the response channel the handshake era uses
(``response_stream``): JSON unless the handler notifies (progress, logs, a ``subscriptions/listen``
stream), then SSE, and the work cancelled when the client leaves.

The rules stay the SDK's, by calling its own public pieces in the order its entry does: the
Content-Type and Accept checks, ``202`` for a notification at a served version, the validation
ladder (``classify_inbound_request``: envelope, routing headers, version), the ``Mcp-Param-*``
headers against the called tool's input schema, errors mapped by ``modern_error_data`` and sent
with the status of ``ERROR_CODE_HTTP_STATUS`` while the answer is still plain JSON. The body was
parsed once already (``transport.envelope``), which also answers what is not JSON-RPC at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
    validate_mcp_param_headers,
)
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    RequestId,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from core.asgi_http import request_header, send_json
from mcp_gateway.kernel.scope_keys import MESSAGE_KEY, TYPED_MESSAGE_KEY
from mcp_gateway.transport.response_stream import PING_SECONDS, RequestChannel, ResponseStream, client_watch

logger = logging.getLogger(__name__)

# The SDK's words for a body that is JSON-RPC but not one request or notification (a posted response).
INVALID_BODY = "Body must be a single JSON-RPC request or notification object"

# Host and Origin are McpAuthMiddleware's; this checks the POST's Content-Type only, in the SDK's words.
_CONTENT_TYPE = TransportSecurityMiddleware(TransportSecuritySettings(enable_dns_rebinding_protection=False))
_MCP_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()


class ModernEraApp:
    """2026-07-28 requests, and requests naming a version nobody serves, for the ladder to refuse."""

    def __init__(self, *, server: Server[Any]) -> None:
        if server.get_tool_input_schema is None:
            # The Mcp-Param check reads tool schemas here (MCPServer always provides the lookup);
            # the SDK's fallback, a tools/list walk per call, would be audited as calls of its own.
            raise ValueError("The server must look up tool input schemas (get_tool_input_schema).")
        self.server = server
        self.input_schema = server.get_tool_input_schema

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        refusal = await _CONTENT_TYPE.validate_request(request, is_post=scope["method"] == "POST")
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if scope["method"] != "POST":
            await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
            return
        if not _accepts_both(request_header(scope, b"accept") or ""):
            await Response(status_code=406)(scope, receive, send)
            return
        message: dict[str, Any] = scope[MESSAGE_KEY]
        if "id" not in message:
            await _notification(request, message, receive, send)
            return
        typed = scope.get(TYPED_MESSAGE_KEY)
        try:
            # The envelope's reading, when it read a request (a posted response is not one).
            call = typed if isinstance(typed, JSONRPCRequest) else JSONRPCRequest.model_validate(message)
        except ValidationError:
            await _refuse(send, request_id=None, code=INVALID_REQUEST, message=INVALID_BODY)
            return
        verdict = self._route(request, call, message)
        if isinstance(verdict, InboundLadderRejection):
            await _refuse(
                send, request_id=call.id, code=verdict.code, message=verdict.message, data=verdict.data
            )
            return
        await self._serve(request, receive, send, call, verdict)

    def _route(
        self, request: Request, call: JSONRPCRequest, message: dict[str, Any]
    ) -> InboundModernRoute | InboundLadderRejection:
        # The header lines decoded once: Starlette's Headers decode them again for every lookup.
        lines = [
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in request.scope["headers"]
        ]
        duplicated = find_duplicated_routing_header(lines)
        if duplicated is not None:
            # Only the raw header lines show a duplicate; the ladder sees a folded mapping.
            return InboundLadderRejection(
                code=HEADER_MISMATCH, message=f"{duplicated} header appears more than once"
            )
        # Folded as Starlette folds them (``dict(request.headers)``): the first line of a name wins.
        headers = dict(reversed(lines))
        verdict = classify_inbound_request(message, headers=headers)
        if isinstance(verdict, InboundLadderRejection):
            return verdict
        return self._param_headers_rejection(request, call, headers) or verdict

    def _param_headers_rejection(
        self, request: Request, call: JSONRPCRequest, headers: Mapping[str, str]
    ) -> InboundLadderRejection | None:
        """A ``tools/call``'s ``Mcp-Param-*`` headers against the tool's published input schema,
        before any work and so always as plain JSON (HTTP 400). Tools the server does not know
        (a federation's) are the request guard's (``tool_headers.param_headers_check``)."""
        params = call.params or {}
        name = params.get("name")
        arguments = params.get("arguments")
        if call.method != "tools/call" or not isinstance(name, str):
            return None
        if arguments is not None and not isinstance(arguments, Mapping):
            return None
        arguments = arguments or {}
        if not arguments and not any(header.startswith(_MCP_PARAM_PREFIX) for header in headers):
            return None
        try:
            schema = self.input_schema(name)
        except Exception:
            # Fail-open as in the SDK: the header check must never break a working call path.
            logger.exception("Mcp-Param header validation skipped: the tool's input schema lookup raised")
            return None
        if schema is None:
            return None
        return validate_mcp_param_headers(schema, arguments, request.headers)

    async def _serve(
        self,
        request: Request,
        receive: Receive,
        send: Send,
        call: JSONRPCRequest,
        verdict: InboundModernRoute,
    ) -> None:
        connection = Connection.from_envelope(
            verdict.protocol_version, verdict.client_info, verdict.client_capabilities
        )
        stream = ResponseStream(send)
        # Its HTTP status follows its answer (400 for -32021, 403 for a step-up): started only when
        # a proxy would otherwise cut it.
        stream.first_ping_seconds = PING_SECONDS
        channel = RequestChannel(
            request=request,
            request_id=call.id,
            progress_token=progress_token_from_params(call.params),
            stream=stream,
            relay=None,
            session_id=None,
        )
        reply: dict[str, Any] | None = None
        status = 200
        async with client_watch(receive, stream) as watch:
            try:
                result = await serve_one(
                    self.server, channel, call.method, call.params, connection=connection, lifespan_state={}
                )
                reply = {"jsonrpc": "2.0", "id": call.id, "result": result}
            except Exception as error:
                data = modern_error_data(error)
                reply = _error_reply(call.id, data)
                status = ERROR_CODE_HTTP_STATUS.get(data.code, 200)
        # Cancelled by the client (or it went away): the protocol sends no response for it.
        await stream.finish(None if watch.cancelled else reply, status=status)


@lru_cache(maxsize=64)
def _accepts_both(accept: str) -> bool:
    """The SDK's reading of an Accept header (``check_accept_headers``), kept per header value:
    a client sends the same one on every request."""
    has_json, has_sse = check_accept_headers(
        Request({"type": "http", "headers": [(b"accept", accept.encode("latin-1"))]})
    )
    return has_json and has_sse


async def _notification(request: Request, message: dict[str, Any], receive: Receive, send: Send) -> None:
    """Acknowledged (202) and dropped, as the SDK does: 2026-07-28 defines no client-to-server
    notifications over HTTP (a client cancels by closing the response). A version nobody serves
    is told so, as for a request."""
    try:
        JSONRPCNotification.model_validate(message)
    except ValidationError:
        await _refuse(send, request_id=None, code=INVALID_REQUEST, message=INVALID_BODY)
        return
    requested = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, "")
    unsupported = unsupported_protocol_version_rejection(requested)
    if unsupported is not None:
        await _refuse(
            send, request_id=None, code=unsupported.code, message=unsupported.message, data=unsupported.data
        )
        return
    await Response(status_code=202)(request.scope, receive, send)


def _error_reply(request_id: RequestId | None, error: ErrorData) -> dict[str, Any]:
    reply = JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    # JSON-RPC wants ``id: null`` on the wire when the request's id could not be read.
    reply.setdefault("id", None)
    return reply


async def _refuse(
    send: Send, *, request_id: RequestId | None, code: int, message: str, data: Any = None
) -> None:
    reply = _error_reply(request_id, ErrorData(code=code, message=message, data=data))
    await send_json(send, status=ERROR_CODE_HTTP_STATUS.get(code, 200), body=reply)

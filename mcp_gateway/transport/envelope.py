"""Read a POST body once, and answer malformed JSON-RPC with the right code before anything else.

The SDK's transport answers a well-formed JSON body that is not a JSON-RPC 2.0 message with -32602
and a pydantic dump; JSON-RPC 2.0 calls that an Invalid Request (-32600), and the dump helps no one.
The parsed message is left in the scope, as JSON and as the SDK's typed model, so later layers need
not parse or validate it again.

The body is parsed with a nesting bound (``core.json_bounds``): a deeper body is a parse error
here, so nothing behind this layer (the SDK parses 2026-07-28 bodies again) ever meets one.
``NaN`` and ``Infinity``, which Python's parser accepts, are not JSON: they are a parse error too,
or an Invalid Request as a request's id, so no answer ever echoes them. JSON-RPC ids are strings
or integers, and MCP's are never null.
"""

from __future__ import annotations

from typing import Any

from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.asgi_http import send_json
from core.json_bounds import json_loads_bounded
from mcp_gateway.kernel.scope_keys import MESSAGE_KEY, TYPED_MESSAGE_KEY

MAX_BODY_BYTES = 4 * 1024 * 1024

PARSE_ERROR = "Parse error: the body is not valid JSON."
INVALID_REQUEST = "Invalid Request: the body is not a JSON-RPC 2.0 request, notification or response."
BODY_TOO_LARGE = "Request body too large."
INVALID_ID = "Invalid Request: a request id must be a string or an integer."


async def jsonrpc_error(
    send: Send, *, status: int, code: int, message: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    await send_json(send, status=status, body=body, headers=headers or [])


class _BodyTooLarge(Exception):
    pass


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _id_is_valid(message: Any) -> bool:
    if not isinstance(message, dict) or "id" not in message:
        return True  # a notification, or no message at all (the schema check answers that)
    request_id = message["id"]
    if isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return True
    # JSON-RPC's one null id: an error answer to a request whose id could not be read.
    return request_id is None and "method" not in message and "error" in message


class JsonRpcEnvelopeMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(receive)
        except _BodyTooLarge:
            await jsonrpc_error(send, status=413, code=-32600, message=BODY_TOO_LARGE)
            return
        # NaN and (-)Infinity outside strings are not JSON; Python's decoder takes them. They are
        # noted in the one parse (and refused below, after the id check, which names a NaN id).
        constants: list[str] = []

        def note_constant(constant: str) -> float:
            constants.append(constant)
            return float(constant)

        try:
            parsed: Any = json_loads_bounded(body, parse_constant=note_constant)
        except (ValueError, RecursionError):
            await jsonrpc_error(send, status=400, code=-32700, message=PARSE_ERROR)
            return
        if not _id_is_valid(parsed):
            await jsonrpc_error(send, status=400, code=-32600, message=INVALID_ID)
            return
        if constants:
            await jsonrpc_error(send, status=400, code=-32700, message=PARSE_ERROR)
            return
        try:
            # The SDK's own message schema; MCP has no JSON-RPC batches since 2025-06-18.
            typed = jsonrpc_message_adapter.validate_python(parsed, by_name=False)
        except ValidationError:
            await jsonrpc_error(send, status=400, code=-32600, message=INVALID_REQUEST)
            return
        scope = {**scope, MESSAGE_KEY: parsed, TYPED_MESSAGE_KEY: typed}
        await self.app(scope, _replay(body, receive), send)

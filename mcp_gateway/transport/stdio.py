"""MCP over stdio for a local client (a desktop app that starts ``manage.py mcp_stdio``).

The same ``server_build`` as the HTTP endpoint serves it, so the registry, the tenant's toolsets,
scopes, rate limits, the audit trail and the error translation are the very ones HTTP clients
meet. What HTTP's layers add to a request's ASGI scope (the caller's ``Identity``) is added here to
each inbound request as a ``ScopedRequest``, the one thing the SDK carries from a transport to the
handlers (``ServerMessageMetadata.request_context``).

There is no OAuth: whoever can run ``manage.py`` already holds the database and the secret key.
The person is named on the command line and acts through their membership, with their role's
scopes (optionally fewer). As for a bearer token, the membership is read again for every request,
so a disabled account, a removed membership, a lowered role or a deactivated tenant stops the
next request, not only the next start.
"""

from __future__ import annotations

import json
import logging
import os
from typing import BinaryIO

import anyio
import anyio.to_thread
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from accounts.models import Membership
from accounts.scopes import scopes_for_role
from accounts.selectors import tenant_get, user_get
from core.db import db_call
from core.errors import AuthenticationFailed, GatehouseError, PermissionDenied
from core.identity import STDIO_CLIENT_ID, Identity
from mcp_gateway.kernel.identity import request_for_identity
from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.sdk import server_lowlevel
from mcp_gateway.pipeline.server import server_build
from mcp_gateway.transport.envelope import BODY_TOO_LARGE, MAX_BODY_BYTES

logger = logging.getLogger(__name__)

# No OAuth client stands behind a local process: the audit trail and usage records show this id,
# and 0 is the "no client row" every consumer of ``Identity.application_id`` accepts.
STDIO_CLIENT_NAME = "Local stdio"

USER_INACTIVE = "The account {username!r} is disabled."
TENANT_INACTIVE = "The tenant {slug!r} is deactivated."
NOT_MEMBER = "{username!r} is not a member of {slug!r}."
SCOPES_NOT_HELD = "The role {role!r} does not hold: {scopes}."
NOT_JSON = "Parse error: a line that is not JSON."
NOT_JSON_RPC = "Invalid request: not a JSON-RPC 2.0 message."


def stdio_identity(*, username: str, tenant_slug: str, narrow_to: frozenset[str] | None = None) -> Identity:
    """Who a stdio session acts as: ``username``'s membership of ``tenant_slug``, with the role's
    scopes, kept to ``narrow_to`` when given. Raises ``NotFound``, ``AuthenticationFailed`` or
    ``PermissionDenied`` with a message for the person at the terminal."""
    user = user_get(username=username)
    tenant = tenant_get(slug=tenant_slug)
    if not user.is_active:
        raise AuthenticationFailed(USER_INACTIVE.format(username=username))
    if not tenant.is_active:
        raise AuthenticationFailed(TENANT_INACTIVE.format(slug=tenant_slug))
    membership = Membership.objects.filter(user=user, tenant=tenant).first()
    if membership is None:
        raise PermissionDenied(NOT_MEMBER.format(username=username, slug=tenant_slug))
    scopes = scopes_for_role(role=membership.role)
    if narrow_to is not None:
        scopes &= narrow_to
    return Identity(
        user_id=user.pk,
        username=user.username,
        tenant_id=tenant.pk,
        tenant_slug=tenant.slug,
        tenant_name=tenant.name,
        role=membership.role,
        scopes=scopes,
        application_id=0,
        client_id=STDIO_CLIENT_ID,
        client_name=STDIO_CLIENT_NAME,
        token_id=0,
    )


def stdio_identity_for_start(
    *, username: str, tenant_slug: str, narrow_to: frozenset[str] | None
) -> Identity:
    """``stdio_identity``, refusing at start a ``--scopes`` the role does not hold (a typo, or more
    than the person may have) rather than quietly serving fewer tools than asked."""
    identity = stdio_identity(username=username, tenant_slug=tenant_slug, narrow_to=narrow_to)
    if narrow_to is not None and narrow_to != identity.scopes:
        missing = ", ".join(sorted(narrow_to - identity.scopes))
        raise PermissionDenied(SCOPES_NOT_HELD.format(role=identity.role, scopes=missing))
    return identity


async def stdio_serve(
    *, username: str, tenant_slug: str, narrow_to: frozenset[str] | None, wire: BinaryIO
) -> None:
    """Serve MCP on stdin and ``wire`` (the reserved stdout, ``core.stdio_wire``) until stdin ends."""
    server = server_build(registry=default_registry())
    lowlevel = server_lowlevel(server=server)
    caller = _Caller(username=username, tenant_slug=tenant_slug, narrow_to=narrow_to)
    lines = _stdin_reserve()
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(caller.read, lines, inbound_send, outbound)
        tasks.start_soon(_write, outbound_receive, wire)
        await lowlevel.run(inbound, outbound, lowlevel.create_initialization_options())
        tasks.cancel_scope.cancel()


def _stdin_reserve() -> BinaryIO:
    """The real stdin, for protocol only; fd 0 then reads the null device, so no child process a
    tool starts can take the client's messages (as the SDK's own stdio transport does)."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return os.fdopen(private, "rb")


async def _write(outbound: ObjectReceiveStream[SessionMessage], wire: BinaryIO) -> None:
    # Python's encoder, not pydantic's: an answer that echoes an unpaired surrogate the client sent
    # (an unknown tool's name) is still sent, escaped, where pydantic's refuses to encode it.
    async with outbound:
        async for item in outbound:
            message = item.message.model_dump(by_alias=True, exclude_unset=True, mode="json")
            line = json.dumps(message, separators=(",", ":")) + "\n"
            await anyio.to_thread.run_sync(_write_line, wire, line.encode())


def _write_line(wire: BinaryIO, line: bytes) -> None:
    wire.write(line)
    wire.flush()


# Stands for a line over the limit, already skipped; it is never compared by value.
_TOO_LARGE = b"\n"


def _next_line(lines: BinaryIO) -> bytes:
    """The next line (empty at the end of input), or ``_TOO_LARGE`` for one longer than an HTTP
    request's body may be, read through to its end and dropped, so a client cannot make the
    process hold more of one message than the endpoint would."""
    line = lines.readline(MAX_BODY_BYTES + 1)
    if len(line) <= MAX_BODY_BYTES or line.endswith(b"\n"):
        return line
    while (rest := lines.readline(MAX_BODY_BYTES)) and not rest.endswith(b"\n"):
        pass
    return _TOO_LARGE


class _Unreadable(Exception):
    def __init__(self, answer: JSONRPCError) -> None:
        super().__init__(answer.error.message)
        self.answer = answer


def _parse(line: bytes) -> JSONRPCMessage:
    """One line from the client as a message; raises ``_Unreadable`` with the error to answer.

    The SDK's stdio transport parses with pydantic's JSON reader, which refuses an unpaired
    surrogate escape (``\\ud800``) and drops the line unanswered, leaving the client waiting;
    Python's reader takes it, as the HTTP endpoint's does, so the guard answers it as there."""
    try:
        raw = json.loads(line.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        raise _Unreadable(_error(None, PARSE_ERROR, NOT_JSON)) from None
    try:
        return jsonrpc_message_adapter.validate_python(raw)
    except (ValidationError, RecursionError):
        request_id = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            request_id = None
        raise _Unreadable(_error(request_id, INVALID_REQUEST, NOT_JSON_RPC)) from None


def _error(request_id: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


class _Caller:
    """Puts the caller, read now, in each inbound request's scope."""

    def __init__(self, *, username: str, tenant_slug: str, narrow_to: frozenset[str] | None) -> None:
        self.username = username
        self.tenant_slug = tenant_slug
        self.narrow_to = narrow_to

    async def read(
        self,
        lines: BinaryIO,
        inbound: ObjectSendStream[SessionMessage | Exception],
        outbound: ObjectSendStream[SessionMessage],
    ) -> None:
        async with inbound:
            while line := await anyio.to_thread.run_sync(_next_line, lines, abandon_on_cancel=True):
                if line is _TOO_LARGE:
                    await outbound.send(SessionMessage(_error(None, INVALID_REQUEST, BODY_TOO_LARGE)))
                    continue
                if not line.strip():
                    continue
                try:
                    message = _parse(line)
                except _Unreadable as unreadable:
                    await outbound.send(SessionMessage(unreadable.answer))
                    continue
                if isinstance(message, JSONRPCRequest):
                    answer = await self._stamped(message)
                    if isinstance(answer, JSONRPCError):
                        await outbound.send(SessionMessage(answer))
                        continue
                    await inbound.send(answer)
                else:
                    # Notifications and the client's answers pass as they are: no caller to check.
                    await inbound.send(SessionMessage(message))

    async def _stamped(self, request: JSONRPCRequest) -> SessionMessage | JSONRPCError:
        """The request with its caller, read now, in its scope; or the refusal to answer it with."""
        try:
            identity: Identity | None = await db_call(
                stdio_identity, username=self.username, tenant_slug=self.tenant_slug, narrow_to=self.narrow_to
            )
        except Exception as error:
            if request.method not in _ANONYMOUS_METHODS:
                # Refused before the SDK, as HTTP's bearer layer refuses a dead token.
                return _refusal(request, error)
            identity = None
        return SessionMessage(
            request, metadata=ServerMessageMetadata(request_context=request_for_identity(identity=identity))
        )


# What the guard lets through with no caller (the handshake and liveness), so a client can still
# connect and read the refusal of its first real request.
_ANONYMOUS_METHODS = frozenset({"initialize", "ping"})


def _refusal(request: JSONRPCRequest, error: Exception) -> JSONRPCError:
    if isinstance(error, GatehouseError):
        logger.warning("stdio request refused: %s", error.message)
    return JSONRPCError(jsonrpc="2.0", id=request.id, error=as_mcp_error(error).error)

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

import logging
from io import TextIOWrapper
from typing import BinaryIO

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest

from accounts.models import Membership
from accounts.scopes import scopes_for_role
from accounts.selectors import tenant_get, user_get
from core.db import db_call
from core.errors import AuthenticationFailed, GatehouseError, PermissionDenied
from core.identity import Identity
from mcp_gateway.endpoint import server_build
from mcp_gateway.identity import request_for_identity
from mcp_gateway.jsonrpc_errors import as_mcp_error
from mcp_gateway.registry import default_registry
from mcp_gateway.sdk import server_lowlevel

logger = logging.getLogger(__name__)

# No OAuth client stands behind a local process: the audit trail and usage records show this id,
# and 0 is the "no client row" every consumer of ``Identity.application_id`` accepts.
STDIO_CLIENT_ID = "stdio"
STDIO_CLIENT_NAME = "Local stdio"

USER_INACTIVE = "The account {username!r} is disabled."
TENANT_INACTIVE = "The tenant {slug!r} is deactivated."
NOT_MEMBER = "{username!r} is not a member of {slug!r}."
SCOPES_NOT_HELD = "The role {role!r} does not hold: {scopes}."


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
    stdout = anyio.wrap_file(TextIOWrapper(wire, encoding="utf-8", write_through=True))
    caller = _Caller(username=username, tenant_slug=tenant_slug, narrow_to=narrow_to)
    async with stdio_server(stdout=stdout) as (inbound, outbound):
        stamped_send, stamped_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(caller.stamp, inbound, stamped_send, outbound)
            await lowlevel.run(stamped_receive, outbound, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


class _Caller:
    """Puts the caller, read now, in each inbound request's scope."""

    def __init__(self, *, username: str, tenant_slug: str, narrow_to: frozenset[str] | None) -> None:
        self.username = username
        self.tenant_slug = tenant_slug
        self.narrow_to = narrow_to

    async def stamp(
        self,
        inbound: ObjectReceiveStream[SessionMessage | Exception],
        stamped: ObjectSendStream[SessionMessage | Exception],
        outbound: ObjectSendStream[SessionMessage],
    ) -> None:
        # Notifications and the client's answers pass as they are: they have no caller to check.
        async with stamped:
            async for item in inbound:
                if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                    request = item.message
                    try:
                        identity = await db_call(
                            stdio_identity,
                            username=self.username,
                            tenant_slug=self.tenant_slug,
                            narrow_to=self.narrow_to,
                        )
                    except Exception as error:
                        if request.method not in _ANONYMOUS_METHODS:
                            # Refused before the SDK, as HTTP's bearer layer refuses a dead token.
                            await outbound.send(_refusal(request, error))
                            continue
                        identity = None
                    item = SessionMessage(
                        request,
                        metadata=ServerMessageMetadata(
                            request_context=request_for_identity(identity=identity)
                        ),
                    )
                await stamped.send(item)


# What the guard lets through with no caller (the handshake and liveness), so a client can still
# connect and read the refusal of its first real request.
_ANONYMOUS_METHODS = frozenset({"initialize", "ping"})


def _refusal(request: JSONRPCRequest, error: Exception) -> SessionMessage:
    if isinstance(error, GatehouseError):
        logger.warning("stdio request refused: %s", error.message)
    translated = as_mcp_error(error)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request.id, error=translated.error))

"""Where an MCP handler finds its caller: the ASGI scope of its request, the one place an identity
travels (``transport.auth`` puts it there, ``transport.sessions`` narrows it to the session's scopes).

Tool handlers and resource templates take a ``ctx: Context`` and call ``identity_from_context``;
the guard, the audit trail and request-state sealing call ``identity_from_request``. The SDK gives a
static resource's function no Context at all (``MCPServer.resource`` refuses one: "Context injection
for static resources is not supported"), so the request guard leaves the request being served
where such a function finds it (``identity_from_current_request``): still that request's scope,
never a second copy of the identity.

Over stdio there is no HTTP request: ``mcp_gateway.transport.stdio`` hands the SDK a ``ScopedRequest``, a
scope with the same keys, so nothing above this module knows which transport carried the call.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context

from core.errors import AuthenticationFailed
from core.identity import Identity
from mcp_gateway.kernel.scope_keys import IDENTITY_KEY, SESSION_KEY


@dataclass(frozen=True, slots=True)
class ScopedRequest:
    """What a transport with no HTTP request (stdio) hands the SDK as each request's
    ``request_context``: just a scope, carrying the same keys ``transport.auth`` puts in an HTTP one, so
    every reader above (guard, audit trail, handlers) finds the caller the one way."""

    scope: dict[str, Any] = field(default_factory=dict)


def request_for_identity(*, identity: Identity | None) -> ScopedRequest:
    """A request stand-in for ``identity``; with None, one that every guarded method refuses as
    unauthenticated."""
    return ScopedRequest(scope={IDENTITY_KEY: identity} if identity is not None else {})


_request: contextvars.ContextVar[Any] = contextvars.ContextVar("gatehouse_resource_request", default=None)


def identity_from_request(request: Any) -> Identity:
    """The identity the bearer middleware put in this HTTP request's ASGI scope."""
    scope = getattr(request, "scope", None) or {}
    identity = scope.get(IDENTITY_KEY)
    if not isinstance(identity, Identity):
        raise AuthenticationFailed()
    return identity


def identity_from_context(ctx: Context) -> Identity:
    return identity_from_request(ctx.request_context.request)


def session_id_from_context(ctx: Context) -> str | None:
    """The handshake-era MCP session this request belongs to, as the audit trail records it; None
    on 2026-07-28, which has no session."""
    session = getattr(ctx.request_context.request, "scope", {}).get(SESSION_KEY)
    return str(session.id) if session is not None else None


def identity_from_current_request() -> Identity:
    """The caller of the request being served, for a static resource's function."""
    return identity_from_request(_request.get())


def current_request_set(*, request: Any) -> contextvars.Token[Any]:
    return _request.set(request)


def current_request_reset(*, token: contextvars.Token[Any]) -> None:
    _request.reset(token)

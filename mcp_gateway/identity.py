"""Where an MCP handler finds its caller: the ASGI scope of its request (``identity_from_request``),
or, for handlers the SDK gives no request, the request guard's context variable."""

from __future__ import annotations

import contextvars
from typing import Any

from mcp.server.mcpserver import Context

from core.errors import AuthenticationFailed
from core.identity import Identity
from mcp_gateway.asgi.scope_keys import IDENTITY_KEY

# Set by the request guard for the duration of each request, for handlers the SDK gives no
# Context (a static resource's function, for one).
_current: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("gatehouse_identity", default=None)


def identity_from_request(request: Any) -> Identity:
    """The identity the bearer middleware put in this HTTP request's ASGI scope."""
    scope = getattr(request, "scope", None) or {}
    identity = scope.get(IDENTITY_KEY)
    if not isinstance(identity, Identity):
        raise AuthenticationFailed()
    return identity


def identity_from_context(ctx: Context) -> Identity:
    return identity_from_request(ctx.request_context.request)


def identity_current() -> Identity:
    """The caller of the MCP request being served (set by ``guard.RequestGuard``)."""
    identity = _current.get()
    if identity is None:
        raise AuthenticationFailed()
    return identity


def identity_set_current(identity: Identity) -> contextvars.Token[Identity | None]:
    return _current.set(identity)


def identity_reset_current(token: contextvars.Token[Identity | None]) -> None:
    _current.reset(token)

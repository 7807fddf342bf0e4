from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context

from mcp_gateway.errors import AuthenticationFailed

SCOPE_KEY = "gatehouse.identity"

# Set by the request guard for the duration of each request, for handlers the SDK gives no
# Context (a static resource's function, for one).
_current: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("gatehouse_identity", default=None)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling: resolved from the bearer token once per HTTP request, never cached globally."""

    user_id: int
    username: str
    tenant_id: int
    tenant_slug: str
    tenant_name: str
    role: str
    scopes: frozenset[str]
    application_id: int
    client_id: str
    client_name: str
    token_id: int


def identity_from_request(request: Any) -> Identity:
    """The identity the bearer middleware put in this HTTP request's ASGI scope."""
    scope = getattr(request, "scope", None) or {}
    identity = scope.get(SCOPE_KEY)
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

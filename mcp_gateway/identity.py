from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context

from mcp_gateway.errors import AuthenticationFailed

SCOPE_KEY = "gatehouse.identity"


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

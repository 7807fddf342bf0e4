"""How the SDK seals ``requestState`` (protocol 2026-07-28's multi-round-trip tool calls).

A tool that needs the person's input returns ``InputRequiredResult``; the client answers and calls
again with the state the server sealed. That second call may reach any worker, so every worker
must seal and unseal with one key (the SDK's default is a key of its own process): it is derived
from ``SECRET_KEY``. The state is bound to the caller (user, tenant and OAuth client), so no one
else can replay it.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateSecurity

from core.crypto import key_derive
from core.errors import AuthenticationFailed
from mcp_gateway.kernel.identity import identity_from_request

HKDF_INFO = b"gatehouse mcp request state"
# Long enough for a person to answer a form; the SDK refuses an older state.
REQUEST_STATE_TTL_SECONDS = 600.0


def _principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    try:
        identity = identity_from_request(ctx.request)
    except AuthenticationFailed:
        return None
    return f"{identity.user_id}:{identity.tenant_id}:{identity.client_id}"


def request_state_security(*, ttl_seconds: float = REQUEST_STATE_TTL_SECONDS) -> RequestStateSecurity:
    """``ttl_seconds``: how long a state this server seals stays valid (a tool task's runner, whose
    states never leave the server, keeps them as long as its tasks wait)."""
    key = key_derive(info=HKDF_INFO)
    return RequestStateSecurity(keys=[key], ttl=ttl_seconds, bind_principal=_principal)

"""Throttles for the pages and OAuth endpoints a stranger can reach: authorize, login, registration.

Each refusal is audited here, once, as ``rate.limited``; the caller decides how to answer it (the
login page shows itself again, the OAuth endpoints let ``config.http_errors`` answer).
"""

from __future__ import annotations

from django.http import HttpRequest

from config.request_context import request_context
from mcp_gateway.audit import audit_record
from mcp_gateway.errors import RateLimited
from mcp_gateway.models import AuditAction, AuditOutcome, RateLimitScope
from mcp_gateway.ratelimit import rate_limit_http
from oauth.selectors import application_find

# Requests whose address is unknown (no peer, unparsable proxy header) share one budget.
UNKNOWN_ADDRESS = "unknown"


def client_address() -> str:
    ctx = request_context()
    return (ctx.ip if ctx else None) or UNKNOWN_ADDRESS


def throttle_check(
    *,
    request: HttpRequest,
    scope: RateLimitScope,
    key: str,
    username: str = "",
    client_id: str = "",
) -> None:
    """Count this request against ``scope`` for ``key``; audit and re-raise a refusal."""
    try:
        rate_limit_http(scope=scope, key=key)
    except RateLimited as refusal:
        audit_record(
            action=AuditAction.RATE_LIMITED,
            outcome=AuditOutcome.DENIED,
            username=username,
            # Looked up only on refusal: the common, allowed request pays nothing for it.
            application=application_find(client_id=client_id),
            target=request.path,
            detail={"scope": str(scope), "retryAfterSeconds": refusal.retry_after_seconds},
        )
        raise

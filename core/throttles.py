"""Throttles for the pages and OAuth endpoints a stranger can reach: authorize, login, registration.

Each refusal is audited here, once, as ``rate.limited``, counted with the refusals of the same
person or address and limit in the same minute (``core.audit_refusals``); the caller decides how
to answer it (the login page shows itself again, the OAuth endpoints let ``core.http_errors``
answer).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from oauth2_provider.models import get_application_model

from core.audit_refusals import audit_refusal_record
from core.errors import RateLimited
from core.models import AuditAction, AuditOutcome, RateLimitScope
from core.ratelimit import rate_limit_http
from core.request_context import request_context

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
        audit_refusal_record(
            key=f"{scope}:{request.path}",
            action=AuditAction.RATE_LIMITED,
            outcome=AuditOutcome.DENIED,
            username=username,
            # Looked up only on refusal: the common, allowed request pays nothing for it.
            application=_application(client_id),
            target=request.path,
            detail={"scope": str(scope), "retryAfterSeconds": refusal.retry_after_seconds},
        )
        raise


def _application(client_id: str) -> Any:
    # DOT's model, by its swappable label: core knows no app of ours, and this is the one lookup
    # a refusal needs.
    if not client_id:
        return None
    return get_application_model().objects.filter(client_id=client_id).first()

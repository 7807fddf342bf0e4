"""Throttles for the pages and OAuth endpoints a stranger can reach: authorize, login, registration.

Registration and authorization from this machine are not counted when ``PUBLIC_URL`` is loopback
too (a development setup): every client run on a laptop registers anew and signs in, and ten of
them would lock the developer out. The password form stays limited there as everywhere; a public
address is limited as always, and so is every address when ``PUBLIC_URL`` is public.

Each refusal is audited here, once, as ``rate.limited``, counted with the refusals of the same
person or address and limit in the same minute (``core.audit.refusals``); the caller decides how
to answer it (the login page shows itself again, the OAuth endpoints let ``core.http_errors``
answer).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest
from oauth2_provider.models import get_application_model

from core.audit.refusals import audit_refusal_record
from core.errors import RateLimited
from core.loopback import is_loopback_address, is_loopback_host
from core.models import AuditAction, AuditOutcome, RateLimitScope
from core.ratelimit.limits import rate_limit_http
from core.request_context import request_context

# Requests whose address is unknown (no peer, unparsable proxy header) share one budget.
UNKNOWN_ADDRESS = "unknown"

# Scopes a loopback client of a loopback development setup is never counted against.
LOOPBACK_DEVELOPMENT_EXEMPT = frozenset({RateLimitScope.REGISTER, RateLimitScope.AUTHORIZE})

# How a refusal names its limit, per scope (AppliedLimit.described); the others say "N per 1 minute".
_DESCRIBED_AS = {RateLimitScope.REGISTER: "{amount} registrations per {period} per address"}


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
    if scope in LOOPBACK_DEVELOPMENT_EXEMPT and loopback_development_request():
        return
    try:
        rate_limit_http(scope=scope, key=key, described_as=_DESCRIBED_AS.get(scope))
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


def loopback_development_request() -> bool:
    """Does this request come from this machine to a server whose PUBLIC_URL is this machine too?"""
    ctx = request_context()
    public_host = urlsplit(settings.PUBLIC_URL).hostname
    return (
        ctx is not None
        and is_loopback_address(ctx.ip)
        and is_loopback_host(public_host, allow_localhost_name=True)
    )


def _application(client_id: str) -> Any:
    # DOT's model, by its swappable label: core knows no app of ours, and this is the one lookup
    # a refusal needs.
    if not client_id:
        return None
    return get_application_model().objects.filter(client_id=client_id).first()

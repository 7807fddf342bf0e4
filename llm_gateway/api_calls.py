"""What every REST API call leaves behind, written in one place after its answer is decided.

django-ninja's exception handlers are synchronous and run inside the event loop, where the ORM
cannot be used; the views, the handlers and the bearer check therefore only note what happened on
the request (``ApiCall``), and ``api_view`` — wrapped around each of the API's URL views — writes it
once the answer is known and before it is sent:

* one ``llm.invoked`` audit row for each call of ``/llm/invoke`` that got past authentication,
  whatever its outcome (``denied`` for scope, rate limit and budget refusals, ``error`` for the
  rest), and a ``server.error`` row for an unexpected failure;
* one JSON log line per call on ``gatehouse.api``: method, path, status, provider, model, duration,
  tokens, error code, tenant and client. Never the prompt, the output or a key.

It also gives django-ninja's bare ``405 Method not allowed`` the API's error shape, so that every
answer under ``/api/v1/`` has one.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponseBase

from core.audit.trail import audit_entry, audit_record_async
from core.errors import GatehouseError
from core.http_errors import api_error_response
from core.identity import Identity
from core.models import AuditAction, AuditOutcome

logger = logging.getLogger("gatehouse.api")

METHOD_NOT_ALLOWED = "This path does not take {method}; it takes {allowed}."
_CALL_ATTRIBUTE = "gatehouse_api_call"
# Refusals of the caller (audited "denied"); a provider's own 429 is a failure ("error").
_REFUSALS = frozenset({"forbidden", "insufficient_scope", "rate_limited", "budget_exceeded"})


class MethodNotAllowed(GatehouseError):
    http_status = 405
    api_code = "method_not_allowed"


@dataclass
class ApiCall:
    """What one API request did, noted as it goes (``api_call``) and written by ``api_view``."""

    identity: Identity | None = None
    audited_action: AuditAction | None = None
    provider: str = ""
    model: str = ""
    call_id: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    error_code: str = ""
    server_error: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def api_call(request: HttpRequest) -> ApiCall:
    """This request's notes, made on first use."""
    call = getattr(request, _CALL_ATTRIBUTE, None)
    if call is None:
        call = ApiCall()
        setattr(request, _CALL_ATTRIBUTE, call)
    return call


def api_view(
    view: Callable[..., Awaitable[HttpResponseBase]], *, audited: AuditAction | None = None
) -> Callable[..., Awaitable[HttpResponseBase]]:
    """``view`` (one of django-ninja's async URL views), with its log line and, for an ``audited``
    action, one audit row per call that got past authentication (malformed bodies included)."""

    # wraps: the view's own attributes (django-ninja's csrf_exempt, for a bearer-only API) stay.
    @functools.wraps(view)
    async def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        started = time.perf_counter()
        call = api_call(request)
        call.audited_action = audited
        response = await view(request, *args, **kwargs)
        if response.status_code == 405 and response.get("Content-Type", "").startswith("text/"):
            allowed = response.get("Allow", "")
            error = MethodNotAllowed(METHOD_NOT_ALLOWED.format(method=request.method, allowed=allowed))
            call.error_code = error.api_code
            response = api_error_response(error, details={"allowed": allowed.split(", ")})
            response["Allow"] = allowed
        duration_ms = round((time.perf_counter() - started) * 1000, 1)
        await _audit(call, status=response.status_code, duration_ms=duration_ms, path=request.path)
        _log(request, call, status=response.status_code, duration_ms=duration_ms)
        return response

    return wrapped


async def _audit(call: ApiCall, *, status: int, duration_ms: float, path: str) -> None:
    if call.server_error:
        await audit_record_async(
            audit_entry(
                action=AuditAction.SERVER_ERROR,
                outcome=AuditOutcome.ERROR,
                identity=call.identity,
                target=path[:500],
                detail={"exception": call.server_error, "channel": "api"},
            )
        )
        return
    if call.audited_action is None or call.identity is None:
        return
    outcome = AuditOutcome.OK
    if status >= 400:
        outcome = AuditOutcome.DENIED if call.error_code in _REFUSALS else AuditOutcome.ERROR
    detail: dict[str, Any] = {
        "channel": "api",
        "provider": call.provider,
        "model": call.model,
        "status": status,
        **call.detail,
    }
    if call.call_id:
        detail["id"] = call.call_id
        detail["tokens"] = {"prompt": call.prompt_tokens, "completion": call.completion_tokens}
        if call.cost is not None:
            detail["cost"] = call.cost
    if call.error_code:
        detail["error"] = call.error_code
    await audit_record_async(
        audit_entry(
            action=call.audited_action,
            outcome=outcome,
            identity=call.identity,
            target=f"{call.provider}/{call.model}"[:500] if call.provider else path[:500],
            duration_ms=duration_ms,
            detail=detail,
        )
    )


def _log(request: HttpRequest, call: ApiCall, *, status: int, duration_ms: float) -> None:
    identity = call.identity
    logger.info(
        "%s %s %s %sms",
        request.method,
        request.path,
        status,
        duration_ms,
        extra={
            "event": "api.call",
            "method": request.method,
            "path": request.path,
            "status": status,
            "duration_ms": duration_ms,
            "provider": call.provider or None,
            "model": call.model or None,
            "prompt_tokens": call.prompt_tokens,
            "completion_tokens": call.completion_tokens,
            "total_tokens": call.prompt_tokens + call.completion_tokens,
            "error_code": call.error_code or None,
            "tenant": identity.tenant_slug if identity else None,
            "client_id": identity.client_id if identity else None,
        },
    )

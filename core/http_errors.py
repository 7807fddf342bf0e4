"""The one place a ``GatehouseError`` raised by Django code becomes an HTTP response.

OAuth endpoints and other machine callers get the RFC 6749 error shape as JSON
(``{"error": ..., "error_description": ...}``); a person's browser gets a plain page. The REST API
(``/api/v1/``) answers its own shape, ``{"error": {"code", "message", "details"}}``, with the code
and status each error class names (``api_error_response``). A refusal that says when to retry (a
rate limit, a spent budget, a provider's 429, a conflict) also says so in ``Retry-After``.

Any other exception that Django would answer with a 500 leaves a ``server.error`` audit row (request
id, method, path, exception class: never its message, the query string or the body, which may carry
secrets) and the endpoint's own 500: ``server_error`` in the OAuth shape for machine callers,
Django's 500 page for browsers. Django's own 4xx exceptions (404, 403, 400) are left to Django.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.utils.deprecation import MiddlewareMixin

from core.audit.trail import audit_record
from core.errors import (
    AuthenticationFailed,
    GatehouseError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    RateLimited,
    Unavailable,
)
from core.models import AuditAction, AuditOutcome
from core.text_safety import storable_text

logger = logging.getLogger(__name__)
# Where Django logs the 500s it answers itself, so ours reach the same handlers.
request_logger = logging.getLogger("django.request")

ERROR_TEMPLATE = "accounts/refused.html"
SERVER_ERROR = "server_error"
SERVER_ERROR_MESSAGE = "The server failed to answer this request; the failure has been recorded."
# Exceptions Django answers with a 4xx of its own (django.core.handlers.exception): not server errors.
_DJANGO_CLIENT_ERRORS = (
    Http404,
    DjangoPermissionDenied,
    BadRequest,
    SuspiciousOperation,
    MultiPartParserError,
)
_AUTHORIZE_PATH = "/oauth/authorize/"

# OAuth-style error codes, so an OAuth client reads our refusals as it reads DOT's own.
_ERROR_CODES: tuple[tuple[type[GatehouseError], str], ...] = (
    (RateLimited, "rate_limited"),
    (AuthenticationFailed, "invalid_token"),
    (PermissionDenied, "access_denied"),
    (InvalidInput, "invalid_request"),
    (NotFound, "not_found"),
    (Unavailable, "temporarily_unavailable"),
)


def error_code(error: GatehouseError) -> str:
    if error.oauth_error:
        return error.oauth_error
    for kind, code in _ERROR_CODES:
        if isinstance(error, kind):
            return code
    return SERVER_ERROR


def wants_html(request: HttpRequest) -> bool:
    """A page for browsers; JSON for the OAuth endpoints that clients call directly and for any
    caller that did not ask for HTML. The authorize endpoint is the OAuth path people visit."""
    if request.path.startswith("/oauth/") and request.path != _AUTHORIZE_PATH:
        return False
    return "text/html" in request.headers.get("Accept", "")


def error_response(request: HttpRequest, error: GatehouseError) -> HttpResponse:
    response: HttpResponse
    if wants_html(request):
        response = render(
            request,
            ERROR_TEMPLATE,
            {"message": error.message, "status": error.http_status},
            status=error.http_status,
        )
    else:
        response = JsonResponse(
            {"error": error_code(error), "error_description": error.message}, status=error.http_status
        )
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.retry_after_seconds)
    # A refusal is about this request and this moment; no cache may replay it.
    response["Cache-Control"] = "no-store"
    return response


def api_error_response(error: GatehouseError, *, details: dict[str, Any] | None = None) -> JsonResponse:
    """The REST API's answer for ``error``: its ``api_code`` and status, its data as ``details``."""
    body = {
        "error": {
            "code": error.api_code,
            "message": error.message,
            "details": details if details is not None else error.data,
        }
    }
    response = JsonResponse(body, status=error.api_status or error.http_status)
    retry_after = getattr(error, "retry_after_seconds", None)
    if isinstance(retry_after, int):
        response["Retry-After"] = str(retry_after)
    response["Cache-Control"] = "no-store"
    return response


class GatehouseErrorMiddleware(MiddlewareMixin):
    """Last in ``MIDDLEWARE`` so it sees a view's exception before any other middleware does."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, GatehouseError):
            return error_response(request, exception)
        if isinstance(exception, _DJANGO_CLIENT_ERRORS):
            return None
        server_error_audit(request=request, exception=exception)
        if settings.DEBUG or wants_html(request):
            # Django logs it and renders its 500 page (or, in DEBUG, the traceback page).
            return None
        request_logger.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"status_code": 500, "request": request},
        )
        response = JsonResponse(
            {"error": SERVER_ERROR, "error_description": SERVER_ERROR_MESSAGE}, status=500
        )
        response["Cache-Control"] = "no-store"
        return response


def server_error_audit(*, request: HttpRequest, exception: Exception) -> None:
    """One ``server.error`` row; never raises, since the 500 must be answered whatever happens here."""
    kind = type(exception)
    try:
        user = getattr(request, "user", None)
        audit_record(
            action=AuditAction.SERVER_ERROR,
            outcome=AuditOutcome.ERROR,
            user=user if user is not None and user.is_authenticated else None,
            target=storable_text(request.path)[0],
            detail={"method": request.method, "exception": f"{kind.__module__}.{kind.__qualname__}"},
        )
    except Exception:
        logger.exception("The audit row of a server error could not be written.")

"""The one place a ``GatehouseError`` raised by Django code becomes an HTTP response.

OAuth endpoints and other machine callers get the RFC 6749 error shape as JSON
(``{"error": ..., "error_description": ...}``); a person's browser gets a plain page. A rate-limit
refusal also says when to retry, in ``Retry-After``. Anything else is left to Django.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.deprecation import MiddlewareMixin

from core.errors import (
    AuthenticationFailed,
    GatehouseError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    RateLimited,
    Unavailable,
)

ERROR_TEMPLATE = "accounts/refused.html"
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
    return "server_error"


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


class GatehouseErrorMiddleware(MiddlewareMixin):
    """Last in ``MIDDLEWARE`` so it sees a view's exception before any other middleware does."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, GatehouseError):
            return error_response(request, exception)
        return None

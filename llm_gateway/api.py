"""The REST API under ``/api/v1/``: a tenant's language models for its own applications.

django-ninja validates every request against the Pydantic schemas in ``llm_gateway.schemas`` and
writes the OpenAPI 3.1 document (``/api/v1/openapi.json``) and the docs page (``/api/v1/docs``, the
Swagger UI django-ninja ships, served from our own static files) from the same code, so nothing of
either is written by hand.

The API is a protected resource of its own (``API_RESOURCE_URL``): a bearer token must have been
issued for it (authorization code for interactive apps, client credentials for a tenant's service
client), so an MCP token does not open it and its tokens do not open ``/mcp``. Views stay thin:
the scope check and the rate limit (the same counter as the ``llm_invoke`` tool's) here, the work
in ``llm_gateway.invoke``; every error, whichever layer raised it, leaves in the one shape
``{"error": {"code", "message", "details"}}`` (``core.http_errors.api_error_response``), and every
call is audited and logged once by ``llm_gateway.api_calls``.
"""

from __future__ import annotations

import inspect
import logging
from datetime import date
from typing import Annotated, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, re_path
from ninja import Header, NinjaAPI, Query
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from core.db_turns import db_turns_owner_set
from core.errors import (
    AuthenticationFailed,
    GatehouseError,
    InsufficientScope,
    InvalidInput,
    NotFound,
    Unavailable,
)
from core.http_errors import api_error_response
from core.identity import Identity
from core.json_bounds import json_loads_bounded
from core.models import AuditAction, RateLimitScope
from core.ratelimit.limits import rate_limit_call
from core.request_context import current_request_id, request_id_new
from llm_gateway.api_calls import api_call, api_view
from llm_gateway.invoke import llm_gateway_invoke
from llm_gateway.providers import llm_providers_list
from llm_gateway.resolution import HEADER_KEY_INVALID, MAX_HEADER_KEY_LENGTH, header_key_check
from llm_gateway.schemas import ErrorResponse, Health, InvokeRequest, InvokeResponse, ProvidersResponse
from llm_gateway.scopes import SCOPE_LLM_INVOKE, SCOPE_USAGE_READ
from llm_gateway.tool_channels import tool_run_for_api
from llm_gateway.usage_report import UsageResponse, usage_report
from oauth.bearer import identity_from_api_bearer
from oauth.challenge import www_authenticate
from oauth.edge_refusals import edge_audit

logger = logging.getLogger(__name__)

# The tool whose rate limit the REST call shares: one counter per person, whichever channel.
RATE_LIMIT_TARGET = "llm_invoke"
PROVIDER_KEY_HEADER = "X-Provider-Api-Key"

TOKEN_MISSING = "A bearer token is required: Authorization: Bearer <token>, issued for this API."
TOKEN_MALFORMED = "The Authorization header must be: Bearer <token>."
BODY_NOT_JSON = "The request body is not valid JSON (UTF-8, at most 64 levels deep)."
BODY_TOO_LARGE = "The request body is larger than the server accepts ({limit:,} bytes)."
NOT_FOUND = "No such path in this API; see /api/v1/docs."
INVALID_REQUEST = "Invalid request: {field}: {message}"
_MAX_FIELD_ERRORS = 10


class BodyTooLarge(GatehouseError):
    http_status = 413
    api_code = "payload_too_large"


class ApiBearer(HttpBearer):
    """The caller's Identity from a bearer token issued for this API; refusals are audited."""

    async def __call__(self, request: HttpRequest) -> Identity:
        header = request.headers.get("Authorization")
        if header is None:
            raise AuthenticationFailed(TOKEN_MISSING)
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or " " in token:
            await self._refused(TOKEN_MALFORMED, data={})
            raise AuthenticationFailed(TOKEN_MALFORMED, data={"presented": True})
        return await self.authenticate(request, token)

    async def authenticate(self, request: HttpRequest, token: str) -> Identity:
        try:
            identity = await identity_from_api_bearer(raw_token=token)
        except AuthenticationFailed as refusal:
            await self._refused(refusal.message, data=refusal.data or {})
            raise AuthenticationFailed(refusal.message, data={"presented": True}) from None
        except DatabaseError:
            logger.exception("Token lookup failed: database unavailable")
            raise Unavailable() from None
        api_call(request).identity = identity
        # The request's own task: its database calls wait in its tenant's queue.
        db_turns_owner_set(owner=identity.tenant_id)
        return identity

    @staticmethod
    async def _refused(reason: str, *, data: dict[str, Any]) -> None:
        await edge_audit(
            action=AuditAction.TOKEN_REJECTED,
            target="bearer",
            detail={"reason": reason, "channel": "api", **data},
        )


class BoundedJsonParser(Parser):
    """JSON bodies with the nesting bound every parser of client JSON has (``core.json_bounds``)."""

    def parse_body(self, request: HttpRequest) -> Any:
        return json_loads_bounded(request.body)


api = NinjaAPI(
    title="Gatehouse API",
    version="1.0.0",
    description=(
        "One governed API for your tenant's language models: every call authenticated (OAuth 2.1 "
        "bearer token issued for this API, scope llm:invoke), budgeted, rate limited, audited, and "
        "answered in the same shapes and errors whatever the provider. Errors are always "
        '{"error": {"code", "message", "details"}}.'
    ),
    urls_namespace="api-v1",
    auth=ApiBearer(),
    parser=BoundedJsonParser(),
)

_ERRORS: dict[int, Any] = {
    status: ErrorResponse for status in (400, 401, 403, 404, 409, 413, 429, 502, 503, 504)
}


def _error(request: HttpRequest, error: GatehouseError) -> HttpResponse:
    call = api_call(request)
    call.error_code = error.api_code
    refused_token = isinstance(error, AuthenticationFailed)
    # A token refusal's details are for the audit trail; the client reads the message.
    response = api_error_response(error, details={} if refused_token else None)
    if refused_token:
        presented = bool((error.data or {}).get("presented"))
        response["WWW-Authenticate"] = _challenge(
            error="invalid_token" if presented else None, description=error.message if presented else None
        )
    elif isinstance(error, InsufficientScope):
        response["WWW-Authenticate"] = _challenge(error="insufficient_scope", description=error.message)
    return response


def _challenge(*, error: str | None, description: str | None) -> str:
    return www_authenticate(
        error=error, description=description, scopes=[SCOPE_LLM_INVOKE], resource_path=settings.API_PATH
    )


@api.exception_handler(GatehouseError)
def _gatehouse_error(request: HttpRequest, error: GatehouseError) -> HttpResponse:
    return _error(request, error)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, error: ValidationError) -> HttpResponse:
    problems = [
        {"field": _field(problem.get("loc", ())), "message": str(problem.get("msg", ""))[:200]}
        for problem in error.errors[:_MAX_FIELD_ERRORS]
    ]
    first = problems[0] if problems else {"field": "body", "message": "invalid"}
    message = INVALID_REQUEST.format(**first)
    if len(error.errors) > 1:
        message += f" (and {len(error.errors) - 1} more)"
    # Never the input itself: pydantic repeats it, and it may be megabytes or a secret.
    return _error(request, InvalidInput(message, data={"field": first["field"], "errors": problems}))


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, error: HttpError) -> HttpResponse:
    # django-ninja raises it for a body it cannot parse (syntax, encoding, depth).
    if error.status_code == 400:
        return _error(request, InvalidInput(BODY_NOT_JSON, data={"field": "body"}))
    return _error(request, GatehouseError(str(error)[:200]))


@api.exception_handler(AuthenticationError)
def _authentication_error(request: HttpRequest, error: AuthenticationError) -> HttpResponse:
    return _error(request, AuthenticationFailed(TOKEN_MISSING))


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, error: Http404) -> HttpResponse:
    return _error(request, NotFound(NOT_FOUND))


@api.exception_handler(RequestDataTooBig)
def _too_large(request: HttpRequest, error: RequestDataTooBig) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
    return _error(request, BodyTooLarge(BODY_TOO_LARGE.format(limit=limit), data={"limitBytes": limit}))


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, error: Exception) -> HttpResponse:
    logger.error("Unexpected error while serving %s", request.path, exc_info=error)
    kind = type(error)
    api_call(request).server_error = f"{kind.__module__}.{kind.__qualname__}"
    return _error(request, GatehouseError())


def _field(location: Any) -> str:
    # ("body", "payload", "messages", 0, "content") -> "messages.0.content"; keys come from the
    # client, so each part and the whole are bounded.
    parts = [str(part)[:40] for part in location]
    if parts[:1] in (["body"], ["header"], ["query"]):
        parts = parts[2:] if parts[0] == "body" else parts[1:]
    return ".".join(parts)[:100] or "body"


def _require_scope(identity: Identity) -> None:
    if SCOPE_LLM_INVOKE not in identity.scopes:
        raise InsufficientScope(required=[SCOPE_LLM_INVOKE], missing=[SCOPE_LLM_INVOKE])


def _provider_key(value: str | None) -> str | None:
    # An empty header is a client's mistake here, not "no key"; anything else, the service's check.
    if value == "":
        limit = MAX_HEADER_KEY_LENGTH
        raise InvalidInput(HEADER_KEY_INVALID.format(limit=limit), data={"field": PROVIDER_KEY_HEADER})
    return header_key_check(header_key=value)


@api.get("/health", auth=None, response=Health, tags=["health"], summary="The API answers")
async def health(request: HttpRequest) -> dict[str, str]:
    """Liveness of the API itself; ``/health/ready`` at the site root checks the database and Redis."""
    return {"status": "ok"}


@api.get(
    "/providers",
    response={200: ProvidersResponse, **_ERRORS},
    tags=["llm"],
    summary="The providers and models this tenant can call",
)
async def providers(
    request: HttpRequest,
    x_provider_api_key: str | None = Header(default=None, alias=PROVIDER_KEY_HEADER),
) -> ProvidersResponse:
    """Each provider's JSON mode and structured output support, and whether this tenant can call it
    now (a stored key, or the key in ``X-Provider-Api-Key``); computed per request."""
    identity: Identity = request.auth  # type: ignore[attr-defined]
    _require_scope(identity)
    return await llm_providers_list(identity=identity, header_key=_provider_key(x_provider_api_key))


@api.post(
    "/llm/invoke",
    response={200: InvokeResponse, **_ERRORS},
    # tool_calls and finish_reason only when MCP tools were bound.
    exclude_unset=True,
    tags=["llm"],
    summary="Call a language model",
)
async def invoke(
    request: HttpRequest,
    payload: InvokeRequest,
    x_provider_api_key: str | None = Header(default=None, alias=PROVIDER_KEY_HEADER),
) -> InvokeResponse:
    """One chat completion through the tenant's keys (or ``X-Provider-Api-Key``, for this call
    only, never stored or logged), within its budgets and rate limits. ``output`` is parsed JSON
    when the reply is JSON; with ``response_schema`` it is validated, and a reply that breaks the
    schema is an error (502 ``invalid_structured_output``), never passed on."""
    identity: Identity = request.auth  # type: ignore[attr-defined]
    call = api_call(request)
    call.provider, call.model = payload.provider, payload.model
    _require_scope(identity)
    header_key = _provider_key(x_provider_api_key)
    # The usual tool limit, not the "expensive" one: the tenant's budgets cap what calls cost; the
    # rate limit only stops a runaway loop (as for llm_invoke, the same contract over MCP).
    await rate_limit_call(identity=identity, scope=RateLimitScope.TOOL, target=RATE_LIMIT_TARGET)
    result = await llm_gateway_invoke(
        identity=identity,
        request=payload,
        header_key=header_key,
        channel="api",
        run_tool=tool_run_for_api(identity=identity, request_id=current_request_id() or request_id_new()),
    )
    call.call_id = result.id
    call.prompt_tokens, call.completion_tokens = result.usage.prompt_tokens, result.usage.completion_tokens
    call.cost = result.cost
    return result


@api.get(
    "/usage",
    response={200: UsageResponse, **_ERRORS},
    tags=["usage"],
    summary="What the tenant spent on models",
    by_alias=True,
)
async def usage(
    request: HttpRequest,
    first_day: Annotated[date | None, Query(alias="from", description="First UTC day (YYYY-MM-DD).")] = None,
    last_day: Annotated[date | None, Query(alias="to", description="Last UTC day, included.")] = None,
    model: Annotated[str | None, Query(description="Only this model (as recorded).")] = None,
    feature: Annotated[str | None, Query(description="Only this feature (ask_question, api...).")] = None,
) -> UsageResponse:
    """Totals and per-day, per-model and per-feature series of the tenant's model calls, every
    feature's (the usage records of ``language_models.governed``); by default the last 30 days.
    Scope ``usage:read`` (admins)."""
    identity: Identity = request.auth  # type: ignore[attr-defined]
    if SCOPE_USAGE_READ not in identity.scopes:
        raise InsufficientScope(required=[SCOPE_USAGE_READ], missing=[SCOPE_USAGE_READ])
    return await usage_report(
        identity=identity, first_day=first_day, last_day=last_day, model=model, feature=feature
    )


def api_urlpatterns() -> list[URLPattern | URLResolver]:
    """The API's URLs, each async view wrapped by ``api_view`` (its audit row and log line), then a
    JSON 404 for any other path under ``/api/``. The docs page and the OpenAPI document are left
    as django-ninja serves them."""
    patterns, _app_name, _namespace = api.urls
    for pattern in patterns:
        if isinstance(pattern, URLPattern) and inspect.iscoroutinefunction(pattern.callback):
            audited = AuditAction.LLM_INVOKED if str(pattern.pattern) == "llm/invoke" else None
            pattern.callback = api_view(pattern.callback, audited=audited)
    return [*patterns, re_path(r"^.*$", api_not_found)]


async def api_not_found(request: HttpRequest) -> HttpResponse:
    return api_error_response(NotFound(NOT_FOUND))

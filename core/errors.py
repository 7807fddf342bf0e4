"""The application's one error hierarchy: each class carries both of its wire codes.

Services and tools raise these. Exactly two places translate them: ``core.http_errors`` to HTTP
(pages, OAuth endpoints, and the REST API's ``{"error": {"code", "message", "details"}}`` shape, whose
``code`` and status each class names in ``api_code`` and ``api_status``) and
``mcp_gateway.kernel.jsonrpc_errors`` to JSON-RPC. The MCP endpoint's own
HTTP answers (401, 403, 404 ...) are written by the ASGI layers that own them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

INSUFFICIENT_SCOPE = "The access token lacks a scope this tool requires."
INSUFFICIENT_SCOPE_STDIO = (
    "This stdio session lacks a scope this tool requires (it has its role's scopes, or those of "
    "--scopes when it was started)."
)
RATE_LIMITED = "Too many requests."
INTERNAL_ERROR = "Internal error. It has been logged; try again or contact the operator."


class GatehouseError(Exception):
    jsonrpc_code = -32603
    http_status = 500
    default_message = INTERNAL_ERROR
    # The OAuth error code a subclass answers with when its standard names one (RFC 7591's
    # ``invalid_client_metadata``, say); otherwise ``core.http_errors`` picks one by class.
    oauth_error: str | None = None
    # The REST API's error code and status (core.http_errors.api_error_response); the status is
    # ``http_status`` unless a class says otherwise.
    api_code = "internal_error"
    api_status: int | None = None

    def __init__(self, message: str | None = None, *, data: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)


class AuthenticationFailed(GatehouseError):
    jsonrpc_code = -32001
    http_status = 401
    default_message = "Authentication required."
    api_code = "unauthorized"


class PermissionDenied(GatehouseError):
    jsonrpc_code = -32001
    http_status = 403
    default_message = "Permission denied."
    api_code = "forbidden"


class InsufficientScope(PermissionDenied):
    default_message = INSUFFICIENT_SCOPE
    api_code = "insufficient_scope"

    def __init__(self, *, required: Iterable[str], missing: Iterable[str], over_stdio: bool = False) -> None:
        required_list, missing_list = sorted(required), sorted(missing)
        said = INSUFFICIENT_SCOPE_STDIO if over_stdio else INSUFFICIENT_SCOPE
        super().__init__(
            f"{said} Required: {' '.join(required_list)}; missing: {' '.join(missing_list)}.",
            data={"required": required_list, "missing": missing_list},
        )


class InvalidInput(GatehouseError):
    jsonrpc_code = -32602
    http_status = 422
    default_message = "Invalid parameters."
    api_code = "validation_error"
    api_status = 400


class HeaderMismatch(InvalidInput):
    """A 2026-07-28 request's HTTP headers say something its body does not (SEP-2243)."""

    jsonrpc_code = -32020
    http_status = 400
    default_message = "A request header does not match the request body."


class NotFound(GatehouseError):
    jsonrpc_code = -32002
    http_status = 404
    default_message = "Not found."
    api_code = "not_found"


class NotReady(GatehouseError):
    jsonrpc_code = -32003
    http_status = 409
    default_message = "Not ready yet; try again shortly."
    api_code = "not_configured"


class Timeout(GatehouseError):
    jsonrpc_code = -32004
    http_status = 504
    default_message = "The operation took too long and was stopped."
    api_code = "timeout"


class Unavailable(GatehouseError):
    jsonrpc_code = -32005
    http_status = 503
    default_message = "A service this needs (database or upstream) is unavailable; try again shortly."
    api_code = "unavailable"


class UpstreamUnavailable(Unavailable):
    """An upstream MCP server a tenant brought (``upstreams``) did not answer this call: down, too
    slow, or answering something that is not MCP. The message and data name the upstream."""

    def __init__(self, *, upstream: str, reason: str) -> None:
        super().__init__(
            f"The upstream MCP server {upstream!r} is unavailable: {reason}",
            data={"upstream": upstream},
        )


class RateLimited(GatehouseError):
    """A rate limit refused the request. The data says when to retry (``retryAfterSeconds``)."""

    jsonrpc_code = -32029
    http_status = 429
    default_message = RATE_LIMITED
    api_code = "rate_limited"

    def __init__(self, *, limit: str, retry_after_seconds: int) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(
            f"{RATE_LIMITED} Limit: {limit}. Retry in {retry_after_seconds} s.",
            data={"limit": limit, "retryAfterSeconds": retry_after_seconds},
        )


class TooManyOpen(GatehouseError):
    """One person holds as many open streams or sessions as a setting allows: closing one lets
    the next in (the same error as a standalone stream's, -32000 with HTTP 429)."""

    jsonrpc_code = -32000
    http_status = 429
    api_code = "too_many_open"

    def __init__(self, message: str, *, reason: str, limit: int) -> None:
        super().__init__(message, data={"reason": reason, "limit": limit})


class Conflict(GatehouseError):
    """Something else holds what this request needs (a turn already running in the same MCP
    session, on any worker). The data says when to retry (``retryAfterSeconds``)."""

    jsonrpc_code = -32009
    http_status = 409
    default_message = "Another request is in progress; try again shortly."
    api_code = "conflict"

    def __init__(self, message: str | None = None, *, retry_after_seconds: int, **data: object) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(message, data={**data, "retryAfterSeconds": retry_after_seconds})


class BudgetExceeded(RateLimited):
    """A tenant's (or person's) language model budget for the period is spent. The data says which
    budget, when it resets (``resetsAt``, ISO 8601 UTC) and how long that is (``retryAfterSeconds``)."""

    api_code = "budget_exceeded"

    def __init__(self, message: str, *, retry_after_seconds: int, **data: object) -> None:
        self.retry_after_seconds = retry_after_seconds
        GatehouseError.__init__(self, message, data={**data, "retryAfterSeconds": retry_after_seconds})


# What a language model provider (or another service beyond Gatehouse) answered, each with the
# status a REST client expects of a gateway; their JSON-RPC codes are their parents'.


class UpstreamRateLimited(Unavailable):
    """The provider is rate limiting us; ``retryAfterSeconds`` is its own hint when it gave one."""

    http_status = 429
    api_code = "provider_rate_limited"

    def __init__(self, message: str, *, retry_after_seconds: int, **data: object) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(message, data={**data, "retryAfterSeconds": retry_after_seconds})


class UpstreamFailed(Unavailable):
    """The provider answered with a failure of its own, or with output that is not what was asked."""

    http_status = 502
    api_code = "provider_error"


class UpstreamRefused(NotReady):
    """The provider refused the credentials, the model or the account (billing): someone must fix it."""

    http_status = 502
    api_code = "provider_refused"


class UpstreamNotFound(NotReady):
    """The provider has no such model (or not for this key)."""

    http_status = 404
    api_code = "model_not_found"


class UpstreamRejectedRequest(NotReady):
    """The provider rejected the request itself (a parameter, a context too long)."""

    http_status = 400
    api_code = "provider_rejected_request"


class StructuredOutputInvalid(UpstreamFailed):
    """The model's output is not the JSON (or does not match the JSON Schema) the caller asked for.
    The data names where it fails and why, never the output itself."""

    api_code = "invalid_structured_output"

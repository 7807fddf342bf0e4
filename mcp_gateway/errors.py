"""The application's one error hierarchy and its translation to JSON-RPC.

Services raise these; ``as_mcp_error`` is the only place they become JSON-RPC errors, and
``mcp_gateway.http.error_response`` the only place they become HTTP responses.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp.shared.exceptions import MCPError

INSUFFICIENT_SCOPE = "The access token lacks a scope this tool requires."


class GatehouseError(Exception):
    jsonrpc_code = -32603
    http_status = 500
    default_message = "Internal error."

    def __init__(self, message: str | None = None, *, data: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)


class AuthenticationFailed(GatehouseError):
    jsonrpc_code = -32001
    http_status = 401
    default_message = "Authentication required."


class PermissionDenied(GatehouseError):
    jsonrpc_code = -32001
    http_status = 403
    default_message = "Permission denied."


class InsufficientScope(PermissionDenied):
    default_message = INSUFFICIENT_SCOPE

    def __init__(self, *, required: Iterable[str], missing: Iterable[str]) -> None:
        required_list, missing_list = sorted(required), sorted(missing)
        super().__init__(
            f"{INSUFFICIENT_SCOPE} Required: {' '.join(required_list)}; missing: {' '.join(missing_list)}.",
            data={"required": required_list, "missing": missing_list},
        )


class NotFound(GatehouseError):
    jsonrpc_code = -32002
    http_status = 404
    default_message = "Not found."


class InvalidInput(GatehouseError):
    jsonrpc_code = -32602
    http_status = 422
    default_message = "Invalid parameters."


def as_mcp_error(error: GatehouseError) -> MCPError:
    return MCPError(code=error.jsonrpc_code, message=error.message, data=error.data)

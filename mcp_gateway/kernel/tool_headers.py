"""Tool arguments mirrored into HTTP headers (SEP-2243's ``x-mcp-header``), for any toolset.

On 2026-07-28 a tool may ask clients to copy an argument into an ``Mcp-Param-<Token>`` request
header, so that a proxy or load balancer can route on it without reading the body. The SDK's
transport checks each such header against the body before any Gatehouse code runs (a header
missing, mismatched or badly encoded is -32020 with HTTP 400), reading the tool's published input
schema; so a toolset only annotates the argument:
``region: Annotated[str, mcp_header("Region", description="...")]``. A federation's tools (an
upstream's published schema) are checked the same way by the request guard (``param_headers_check``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from mcp.shared.inbound import (
    MCP_PROTOCOL_VERSION_HEADER,
    X_MCP_HEADER_KEY,
    find_invalid_x_mcp_header,
    validate_mcp_param_headers,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field
from pydantic.config import JsonDict

from core.errors import HeaderMismatch


def mcp_header(token: str, *, description: str | None = None) -> Any:
    """A pydantic ``Field`` whose property carries ``x-mcp-header: token``.

    The argument's type must be a string, an integer or a boolean (the SDK refuses the tool when the
    server is built otherwise); ``T | None = None`` is published as plain ``T``, since a header
    stands for one primitive type, and a client leaves the header out when it leaves the argument
    out. A token that is not a valid header name is refused here, when the toolset is imported.
    """
    probe = {"type": "object", "properties": {"p": {"type": "string", X_MCP_HEADER_KEY: token}}}
    if (reason := find_invalid_x_mcp_header(probe)) is not None:
        raise ImproperlyConfigured(f"x-mcp-header {token!r} is not a valid header name: {reason}")

    def annotate(schema: JsonDict) -> None:
        branches = schema.get("anyOf")
        if isinstance(branches, list):
            typed = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(typed) == 1 and len(typed) < len(branches) and isinstance(typed[0], dict):
                del schema["anyOf"]
                schema.update(typed[0])
                if "default" in schema and schema["default"] is None:
                    del schema["default"]  # "no value" is no argument, not a null one
        schema[X_MCP_HEADER_KEY] = token

    return Field(description=description, json_schema_extra=annotate)


def param_headers_check(*, input_schema: Any, arguments: Any, request: Any) -> None:
    """Refuse (``HeaderMismatch``) a 2026-07-28 call whose ``Mcp-Param-*`` headers disagree with
    its arguments under ``input_schema``, as the SDK's transport refuses one to the server's own
    tools. The transport knows only those, so the guard calls this for the tools it resolves itself
    (a federation's). Handshake-era requests carry no such headers and are not checked.
    """
    headers = getattr(request, "headers", None)
    if headers is None or headers.get(MCP_PROTOCOL_VERSION_HEADER) not in MODERN_PROTOCOL_VERSIONS:
        return
    if not isinstance(arguments, Mapping):
        return  # the argument validation refuses it
    refusal = validate_mcp_param_headers(input_schema, arguments, headers)
    if refusal is not None:
        raise HeaderMismatch(refusal.message)

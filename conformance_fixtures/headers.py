"""Fixtures of the conformance suite's custom-header scenarios (SEP-2243), part of the ``conformance``
toolset (``conformance_fixtures.toolset``).

``http-custom-header-server-validation`` looks for the first listed tool with a string
``x-mcp-header`` argument and sends it ``tools/call`` requests whose ``Mcp-Param-*`` headers agree
with the body, disagree, are badly encoded or are missing; the client scenarios
(``http-custom-headers``) call these same two tools by name, with the schemas of the suite's own
fixture server. The checking itself is the SDK transport's, for every toolset (``tool_headers``):
these tools only declare their headers, run through the guard like any other, and say what arrived.
"""

from __future__ import annotations

import json
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import ContentBlock, TextContent
from pydantic import Field

from accounts.scopes import SCOPE_READ
from mcp_gateway.kernel.registry import ToolSpec, tool
from mcp_gateway.kernel.tool_headers import mcp_header


def _received(arguments: dict[str, object]) -> list[ContentBlock]:
    given = {name: value for name, value in arguments.items() if value is not None}
    text = f"Custom headers received: {json.dumps(given, ensure_ascii=False)}"
    return [TextContent(type="text", text=text)]


@tool(
    name="test_custom_headers",
    description="A tool with x-mcp-header annotations to test custom header mirroring and encoding.",
    scopes=[SCOPE_READ],
    structured=False,
)
async def custom_headers(
    region: Annotated[str, mcp_header("Region", description="Plain ASCII string value")],
    priority: Annotated[int, mcp_header("Priority", description="Integer numeric value")],
    query: Annotated[str, Field(description="No x-mcp-header annotation: not mirrored")],
    verbose: Annotated[bool | None, mcp_header("Verbose", description="Boolean value")] = None,
    debug: Annotated[bool | None, mcp_header("Debug", description="Boolean true value")] = None,
    empty_val: Annotated[str | None, mcp_header("EmptyVal", description="Empty string value")] = None,
    method_val: Annotated[
        str | None, mcp_header("Method", description="Mirrored as Mcp-Param-Method, not Mcp-Method")
    ] = None,
    float_val: Annotated[float | None, Field(description="Floating point value: not mirrored")] = None,
    non_ascii_val: Annotated[
        str | None, mcp_header("NonAscii", description="Non-ASCII string value: Base64 in the header")
    ] = None,
    whitespace_val: Annotated[
        str | None, mcp_header("Whitespace", description="Leading and trailing whitespace: Base64")
    ] = None,
    leading_space_val: Annotated[
        str | None, mcp_header("LeadingSpace", description="Leading space only: Base64")
    ] = None,
    trailing_space_val: Annotated[
        str | None, mcp_header("TrailingSpace", description="Trailing space only: Base64")
    ] = None,
    internal_space_val: Annotated[
        str | None, mcp_header("InternalSpace", description="Internal spaces only: plain ASCII")
    ] = None,
    control_char_val: Annotated[
        str | None, mcp_header("ControlChar", description="Control characters: Base64")
    ] = None,
    crlf_val: Annotated[
        str | None, mcp_header("CrLf", description="Carriage return and line feed: Base64")
    ] = None,
    tab_val: Annotated[str | None, mcp_header("Tab", description="Leading tab: Base64")] = None,
) -> list[ContentBlock]:
    return _received(
        {
            "region": region,
            "priority": priority,
            "query": query,
            "verbose": verbose,
            "debug": debug,
            "empty_val": empty_val,
            "method_val": method_val,
            "float_val": float_val,
            "non_ascii_val": non_ascii_val,
            "whitespace_val": whitespace_val,
            "leading_space_val": leading_space_val,
            "trailing_space_val": trailing_space_val,
            "internal_space_val": internal_space_val,
            "control_char_val": control_char_val,
            "crlf_val": crlf_val,
            "tab_val": tab_val,
        }
    )


@tool(
    name="test_custom_headers_null",
    description="A tool for testing omitted x-mcp-header parameters (no value, no header).",
    scopes=[SCOPE_READ],
    structured=False,
)
async def custom_headers_null(
    region: Annotated[str, mcp_header("Region", description="Plain ASCII string value")],
    priority: Annotated[int, mcp_header("Priority", description="Integer numeric value")],
    query: Annotated[str, Field(description="No x-mcp-header annotation")],
    verbose: Annotated[bool | None, mcp_header("Verbose", description="Boolean value, left out")] = None,
) -> list[ContentBlock]:
    return _received({"region": region, "priority": priority, "query": query, "verbose": verbose})


TOOLS: tuple[ToolSpec, ...] = (custom_headers, custom_headers_null)
PROMPTS: tuple[str, ...] = ()


def install(server: MCPServer) -> None:
    """Resources, prompts and handlers these fixtures need on the SDK server (none: tools only)."""

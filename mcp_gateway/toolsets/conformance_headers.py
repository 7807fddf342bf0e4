"""Fixtures of the conformance suite's 2026-07-28 requirement set (part of the ``conformance``
toolset, ``mcp_gateway.toolsets.conformance``): placeholder, filled in by issue 19's work."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from mcp_gateway.registry import ToolSpec

TOOLS: tuple[ToolSpec, ...] = ()
PROMPTS: tuple[str, ...] = ()


def install(server: MCPServer) -> None:
    """Resources, prompts and handlers these fixtures need on the SDK server (none yet)."""

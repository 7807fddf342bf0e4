"""A tool's ``Context`` as the SDK builds it for a call in progress, for tests that run a workflow
command (and so a nested tool call) without a client connection behind it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer

from core.identity import Identity
from mcp_gateway.kernel.scope_keys import IDENTITY_KEY, SESSION_KEY


def tool_context(*, server: MCPServer, identity: Identity, session_id: str | None = None) -> Context:
    """The request (identity, session) and its id are what the pipeline reads on this path; a tool
    asking the client something would fail, as there is no connection."""
    scope: dict[str, Any] = {IDENTITY_KEY: identity}
    if session_id is not None:
        scope[SESSION_KEY] = SimpleNamespace(id=session_id)
    request_context: Any = ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context=None,
        protocol_version="2025-11-25",
        method="tools/call",
        params={},
        request_id=1,
        request=SimpleNamespace(scope=scope),
    )
    return Context(request_context=request_context, mcp_server=server)

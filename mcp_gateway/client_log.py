"""Log messages to the MCP client, honouring the level its session asked for (logging/setLevel)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from mcp_types import LoggingLevel

from mcp_gateway.asgi.scope_keys import SESSION_KEY
from mcp_gateway.sessions import LiveSession

# RFC 5424 severities, least to most severe, as MCP uses them.
SEVERITY: dict[str, int] = {
    name: rank
    for rank, name in enumerate(
        ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    )
}


def client_wants(*, requested: str, level: str) -> bool:
    """Whether a message at ``level`` passes a session that asked for ``requested`` (none: all)."""
    return not requested or SEVERITY[level] >= SEVERITY.get(requested, 0)


async def client_log(ctx: Context, level: LoggingLevel, data: Any) -> None:
    session = getattr(ctx.request_context.request, "scope", {}).get(SESSION_KEY)
    requested = session.log_level if isinstance(session, LiveSession) else ""
    if client_wants(requested=requested, level=level):
        await ctx.log(level, data)

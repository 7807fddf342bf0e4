"""Log messages to the MCP client, at the level the client asked for.

A handshake-era session asks once (``logging/setLevel``, kept on the session row). A 2026-07-28
request asks for itself, in ``_meta['io.modelcontextprotocol/logLevel']``: without it nothing is
sent at all (the revision's MUST NOT), and a value that is not a level reads as none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context
from mcp_types import LOG_LEVEL_META_KEY, LoggingLevel

from mcp_gateway.kernel.client_capabilities import client_speaks_per_request
from mcp_gateway.kernel.scope_keys import SESSION_KEY
from mcp_gateway.kernel.sessions import LiveSession

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


def request_log_level(*, meta: Mapping[str, Any] | None) -> str | None:
    """The lowest level a 2026-07-28 request asked to hear; None when it asked for none."""
    requested = meta.get(LOG_LEVEL_META_KEY) if isinstance(meta, Mapping) else None
    return requested if isinstance(requested, str) and requested in SEVERITY else None


async def client_log(ctx: Context, level: LoggingLevel, data: Any) -> None:
    if client_speaks_per_request(ctx):
        requested = request_log_level(meta=ctx.request_context.meta)
        if requested is None:
            return
    else:
        session = getattr(ctx.request_context.request, "scope", {}).get(SESSION_KEY)
        requested = session.log_level if isinstance(session, LiveSession) else ""
    if client_wants(requested=requested, level=level):
        await ctx.log(level, data)

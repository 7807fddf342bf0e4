"""The baseline: the official SDK's MCPServer with the same trivial tool and no auth.

``python benchmarks/bare_server.py PORT`` serves it under uvicorn (the SDK's own recipe);
``daphne benchmarks.bare_server:application`` under Daphne, Gatehouse's server (and so under
granian), to separate what the ASGI server costs from what the gateway costs.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ContentBlock, TextContent

server: MCPServer = MCPServer(name="bare")


@server.tool(name="test_simple_text", description="Returns a simple text response.", structured_output=False)
async def test_simple_text() -> list[ContentBlock]:
    return [TextContent(type="text", text="This is a simple text response for testing.")]


starlette_app = server.streamable_http_app()
_started: asyncio.Event | None = None
_runner: asyncio.Task[None] | None = None


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Daphne runs no ASGI lifespan: enter the session manager on the first request instead (and
    under granian, which does, acknowledge it without entering the manager twice)."""
    global _started, _runner
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if _started is None:
        _started = asyncio.Event()
        started = _started

        async def run() -> None:
            async with server.session_manager.run():
                started.set()
                await asyncio.Event().wait()

        _runner = asyncio.get_running_loop().create_task(run())
    await _started.wait()
    await starlette_app(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(starlette_app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")

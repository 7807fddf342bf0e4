"""The baseline: the official SDK's MCPServer with the same trivial tool, no auth, under uvicorn."""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ContentBlock, TextContent

server: MCPServer = MCPServer(name="bare")


@server.tool(name="test_simple_text", description="Returns a simple text response.", structured_output=False)
async def test_simple_text() -> list[ContentBlock]:
    return [TextContent(type="text", text="This is a simple text response for testing.")]


if __name__ == "__main__":
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")

"""An MCP server for the upstream tests, run as its own process over Streamable HTTP, SSE or stdio:
``python tests/upstream_server.py http|sse|stdio [PORT] [--record FILE]``.

Its tools report what Gatehouse sent it (the headers of the HTTP request, for the credential tests),
send progress and log messages, wait to be cancelled, and ask the client through elicitation and
sampling. With ``--record``, every request's headers and every cancellation are appended to FILE as
JSON lines, so a test can assert what reached the upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import SamplingMessage, TextContent
from pydantic import BaseModel, Field

parser = argparse.ArgumentParser()
parser.add_argument("transport", choices=["http", "sse", "stdio"])
parser.add_argument("port", nargs="?", type=int, default=0)
parser.add_argument("--record", default="")
parser.add_argument("--require-header", default="", help="NAME=VALUE every HTTP request must carry")
options = parser.parse_args()

server = MCPServer(name="upstream-test", instructions="An upstream for Gatehouse's tests.")


def record(event: dict[str, Any]) -> None:
    if options.record:
        with Path(options.record).open("a") as out:
            out.write(json.dumps(event) + "\n")


def _headers(ctx: Context) -> dict[str, str]:
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None)
    return {k.lower(): v for k, v in headers.items()} if headers is not None else {}


class Echoed(BaseModel):
    text: str
    pid: int


@server.tool(description="Echo the text back.")
async def echo(text: str, ctx: Context) -> Echoed:
    record({"tool": "echo", "headers": _headers(ctx)})
    return Echoed(text=text, pid=os.getpid())


@server.tool(description="The HTTP headers this server received for the call.")
async def received_headers(ctx: Context) -> dict[str, str]:
    return _headers(ctx)


@server.tool(description="Count to n, reporting progress and logging each step.")
async def count_to(n: int, ctx: Context) -> str:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.info(f"counted {i}")
    return f"counted to {n}"


@server.tool(description="Sleep, unless cancelled first (which is recorded).")
async def sleep(seconds: float, ctx: Context) -> str:
    record({"tool": "sleep", "started": True})
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record({"tool": "sleep", "cancelled": True})
        raise
    return f"slept {seconds}"


class Name(BaseModel):
    name: str = Field(description="Your name")


@server.tool(description="Ask the user for their name (elicitation).")
async def ask_name(ctx: Context) -> str:
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


@server.tool(description="Ask the client's model (sampling) and return its answer.")
async def ask_model(prompt: str, ctx: Context) -> str:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    result = await ctx.request_context.session.create_message(
        [message], max_tokens=50, related_request_id=ctx.request_context.request_id
    )
    content = result.content
    blocks = content if isinstance(content, list) else [content]
    return "model says: " + "".join(b.text for b in blocks if isinstance(b, TextContent))


@server.tool(description="Publish one more tool, named as asked, and say that the tool list changed.")
async def add_tool(name: str, ctx: Context) -> str:
    async def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description="A tool added at run time.")
    await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="A tool that fails with a message.")
async def fail() -> str:
    raise ValueError("this tool always fails")


@server.resource("upstream://notes/readme", description="A note.")
async def readme() -> str:
    return "upstream readme"


@server.resource("upstream://items/{item_id}", description="An item by id.")
async def item(item_id: str) -> str:
    return f"item {item_id}"


@server.prompt(description="A greeting prompt.")
def greet(name: str) -> str:
    return f"Please greet {name}."


def main() -> None:
    if options.transport == "stdio":
        server.run("stdio")
        return
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if options.transport == "sse":
        server.run("sse", host="127.0.0.1", port=options.port, transport_security=security)
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.port, transport_security=security)


if __name__ == "__main__":
    main()

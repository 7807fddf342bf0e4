"""A toolset for the tool-task tests (``GATEHOUSE_TOOLSETS`` of the test and of its worker
processes): tools that answer, report an error, crash, sleep, time out and ask for input, each
reached through the server's real machinery like any other tool."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    ContentBlock,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)
from pydantic import Field

from accounts.scopes import SCOPE_READ, SCOPE_WRITE
from mcp_gateway.kernel.registry import Toolset, tool

TOOLSET_MODULE = "tests.jobs.task_tools"
SOFT_ERROR = "The tool says no."
CRASH_DETAIL = "internal detail the client never sees 7731"
ASK_INPUT = "answer"


def _text(text: str) -> list[ContentBlock]:
    return [TextContent(type="text", text=text)]


def _log(path: str, line: str) -> None:
    if not path:
        return
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, f"{line} {os.getpid()}\n".encode())
    finally:
        os.close(descriptor)


@tool(
    name="tt_echo",
    description="Echo the text.",
    scopes=[SCOPE_READ],
    structured=False,
    task_support="optional",
)
async def tt_echo(text: str, nested: dict | None = None) -> list[ContentBlock]:
    return _text(text)


@tool(
    name="tt_soft_error",
    description="Report an error.",
    scopes=[SCOPE_READ],
    structured=False,
    task_support="optional",
)
async def tt_soft_error() -> list[ContentBlock]:
    raise ToolError(SOFT_ERROR)


@tool(name="tt_crash", description="Crash.", scopes=[SCOPE_READ], structured=False, task_support="optional")
async def tt_crash() -> list[ContentBlock]:
    raise RuntimeError(CRASH_DETAIL)


@tool(
    name="tt_sleep",
    description="Sleep, reporting progress; writes 'start' and 'end' lines to the log.",
    scopes=[SCOPE_READ],
    structured=False,
    task_support="optional",
    timeout_seconds=300,
)
async def tt_sleep(
    seconds: Annotated[float, Field(ge=0, le=120)], ctx: Context, log: str = ""
) -> list[ContentBlock]:
    _log(log, "start")
    await ctx.report_progress(1, 2, "Sleeping now.")
    await asyncio.sleep(seconds)
    _log(log, "end")
    return _text(f"slept {seconds:g}")


@tool(
    name="tt_timeout",
    description="Outlive its time limit.",
    scopes=[SCOPE_READ],
    structured=False,
    task_support="optional",
    timeout_seconds=0.5,
)
async def tt_timeout() -> list[ContentBlock]:
    await asyncio.sleep(60)
    return _text("never")


@tool(
    name="tt_write",
    description="Needs mcp:write.",
    scopes=[SCOPE_WRITE],
    structured=False,
    task_support="optional",
)
async def tt_write() -> list[ContentBlock]:
    return _text("written")


@tool(
    name="tt_ask",
    description="Ask the person for an answer first, then echo it.",
    scopes=[SCOPE_READ],
    structured=False,
    task_support="optional",
)
async def tt_ask(question: str, ctx: Context) -> list[ContentBlock] | InputRequiredResult:
    if not ctx.request_state:
        form = ElicitRequestFormParams(
            message=question,
            requested_schema={"type": "object", "properties": {"answer": {"type": "string"}}},
        )
        return InputRequiredResult(
            input_requests={ASK_INPUT: ElicitRequest(params=form)},
            request_state=json.dumps({"question": question}),
        )
    asked = json.loads(ctx.request_state)["question"]
    reply = (ctx.input_responses or {}).get(ASK_INPUT)
    answer = reply.content.get("answer") if isinstance(reply, ElicitResult) and reply.content else None
    return _text(f"{asked} -> {answer}")


toolset = Toolset(
    name="tool_task_tests",
    description="Tools for the tool-task tests.",
    tools=(tt_echo, tt_soft_error, tt_crash, tt_sleep, tt_timeout, tt_write, tt_ask),
)

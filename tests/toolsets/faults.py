"""A toolset that fails on purpose, loaded only by the test server that checks the error vocabulary."""

from __future__ import annotations

import asyncio

from django.db import OperationalError
from mcp.server.mcpserver import Context

from accounts.scopes import SCOPE_READ
from core.errors import NotFound, NotReady
from mcp_gateway.kernel.registry import Toolset, tool

SECRET_DETAIL = "password=hunter2 at /srv/gatehouse/secrets.py:42"


@tool(name="fail_internal", description="Raise an unexpected exception.", scopes=[SCOPE_READ])
async def fail_internal() -> str:
    raise RuntimeError(SECRET_DETAIL)


@tool(name="fail_not_found", description="Look up something that is not there.", scopes=[SCOPE_READ])
async def fail_not_found() -> str:
    raise NotFound("No such report in this tenant.")


@tool(name="fail_not_ready", description="Ask for a result that is not ready.", scopes=[SCOPE_READ])
async def fail_not_ready() -> str:
    raise NotReady("The report is still being prepared.")


@tool(name="fail_slowly", description="Take longer than allowed.", scopes=[SCOPE_READ], timeout_seconds=0.2)
async def fail_slowly() -> str:
    await asyncio.sleep(5)
    return "never"


@tool(name="fail_database", description="Lose the database.", scopes=[SCOPE_READ])
async def fail_database() -> str:
    raise OperationalError("connection to server at 10.0.0.5 refused")


@tool(name="count_with_progress", description="Count, reporting progress.", scopes=[SCOPE_READ])
async def count_with_progress(steps: int, ctx: Context) -> int:
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return steps


@tool(name="wait_for_cancel", description="Wait until cancelled.", scopes=[SCOPE_READ], timeout_seconds=120)
async def wait_for_cancel(ctx: Context) -> str:
    # Said first, so that a test can cancel the call knowing that it runs.
    await ctx.report_progress(0, None, "waiting")
    await asyncio.sleep(60)
    return "not cancelled"


@tool(
    name="remember",
    description="Accept a note with secrets beside it (for the audit trail's redaction).",
    scopes=[SCOPE_READ],
    secret_arguments=["pin"],
)
async def remember(note: str, pin: str, api_key: str) -> str:
    return "remembered"


toolset = Toolset(
    name="faults",
    description="Deliberate failures for tests.",
    enabled_by_default=True,
    tools=(
        fail_internal,
        fail_not_found,
        fail_not_ready,
        fail_slowly,
        fail_database,
        count_with_progress,
        wait_for_cancel,
        remember,
    ),
)

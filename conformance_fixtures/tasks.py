"""Fixtures of the conformance suite's tasks scenarios (``tasks-*``, the ``io.modelcontextprotocol/
tasks`` extension of 2026-07-28; part of the ``conformance`` toolset). They are ordinary tools that
declare ``task_support``: the endpoint (``mcp_gateway.pipeline.tasks_2026_07_28``) answers their calls with a
task and the registered runner runs these same handlers. Those that need input ask for it with the
SDK's ``InputRequiredResult`` (2026-07-28) or mid-call through the session (older versions), as
``ask_question`` does; inside a task the runner turns the question into ``input_required``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
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

from accounts.scopes import SCOPE_READ
from mcp_gateway.kernel.registry import ToolSpec, tool
from mcp_gateway.kernel.tool_tasks_2026_07_28 import TaskSupport
from mcp_gateway.pipeline.client_requests import client_asks_between_calls, client_elicit
from mcp_gateway.pipeline.tasks_2026_07_28 import task_escalation_register, tool_task_escalate

SLOW_COMPUTE_MAX_SECONDS = 120
CONFIRM_INPUT = "confirm"
MULTI_INPUTS = ("first", "second")
USER_NAME_INPUT = "user_name"
LABEL_MAX_CHARS = 200


def _fixture(name: str, description: str, task_support: TaskSupport, **extra: Any) -> Any:
    return tool(
        name=name,
        description=description,
        scopes=[SCOPE_READ],
        structured=False,
        task_support=task_support,
        **extra,
    )


def _text(text: str) -> list[ContentBlock]:
    return [TextContent(type="text", text=text)]


def _answer(ctx: Context, key: str) -> ElicitResult | None:
    """The client's answer to input request ``key`` of an earlier round, if it gave one."""
    reply = (ctx.input_responses or {}).get(key)
    if isinstance(reply, ElicitResult):
        return reply
    if isinstance(reply, dict):
        try:
            return ElicitResult.model_validate(reply, by_name=False)
        except ValueError:
            return None
    return None


def _form(message: str, schema: dict[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
    "required": ["confirm"],
}
NAME_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "confirm": {"type": "boolean", "title": "Confirm"},
    },
    "required": ["name"],
}


@_fixture("greet", "Says hello (never a task).", "forbidden")
async def greet(name: Annotated[str, Field(max_length=LABEL_MAX_CHARS)]) -> list[ContentBlock]:
    return _text(f"Hello, {name}!")


@_fixture(
    "slow_compute",
    "Sleeps for `seconds` seconds, then answers (a task where the client speaks tasks).",
    "optional",
    timeout_seconds=SLOW_COMPUTE_MAX_SECONDS + 30,
)
async def slow_compute(
    seconds: Annotated[float, Field(ge=0, le=SLOW_COMPUTE_MAX_SECONDS)],
    label: Annotated[str, Field(max_length=LABEL_MAX_CHARS)] = "",
) -> list[ContentBlock]:
    await asyncio.sleep(seconds)
    return _text(f"Computed {label or 'result'} after {seconds:g} s.")


@_fixture("failing_job", "Reports a tool error after about a second; runs only as a task.", "required")
async def failing_job() -> list[ContentBlock]:
    await asyncio.sleep(1)
    raise ToolError("failing_job failed, as it always does.")


@_fixture("protocol_error_job", "Crashes, which the client sees as a protocol error.", "optional")
async def protocol_error_job() -> list[ContentBlock]:
    raise RuntimeError("protocol_error_job crashed on purpose")


@_fixture("confirm_delete", "Asks the user to confirm before (pretending to) delete a file.", "optional")
async def confirm_delete(
    filename: Annotated[str, Field(max_length=LABEL_MAX_CHARS)], ctx: Context
) -> list[ContentBlock] | InputRequiredResult:
    message = f"Delete {filename}?"
    answer = _answer(ctx, CONFIRM_INPUT)
    if answer is None:
        if client_asks_between_calls(ctx):
            return InputRequiredResult(input_requests={CONFIRM_INPUT: _form(message, CONFIRM_SCHEMA)})
        answer = await client_elicit(ctx, message=message, schema=CONFIRM_SCHEMA)
    confirmed = answer.action == "accept" and bool((answer.content or {}).get("confirm"))
    return _text(f"Deleted {filename}." if confirmed else f"Kept {filename}.")


@_fixture("multi_input", "Asks two questions at once, then answers with both replies.", "optional")
async def multi_input(ctx: Context) -> list[ContentBlock] | InputRequiredResult:
    answers = {key: _answer(ctx, key) for key in MULTI_INPUTS}
    pending = [key for key, answer in answers.items() if answer is None]
    if pending and client_asks_between_calls(ctx):
        return InputRequiredResult(
            input_requests={key: _form(f"Input {key}?", NAME_SCHEMA) for key in pending}
        )
    for key in pending:
        answers[key] = await client_elicit(ctx, message=f"Input {key}?", schema=NAME_SCHEMA)
    names = [str((answer.content or {}).get("name", "")) if answer else "" for answer in answers.values()]
    return _text(f"Received: {', '.join(names)}.")


@_fixture(
    "test_tool_with_task",
    "Asks for a name between calls, then continues as a task that greets it; runs only as a task.",
    "required",
)
async def tool_with_task(
    ctx: Context, user_name: Annotated[str | None, Field(max_length=LABEL_MAX_CHARS)] = None
) -> list[ContentBlock] | InputRequiredResult:
    if user_name is not None:
        # The task's run, with what the earlier round gathered.
        return _text(f"Hello, {user_name}! (gathered before the task started)")
    answer = _answer(ctx, USER_NAME_INPUT)
    if answer is None:
        if client_asks_between_calls(ctx):
            return InputRequiredResult(
                input_requests={USER_NAME_INPUT: _form("What is your name?", NAME_SCHEMA)}
            )
        answer = await client_elicit(ctx, message="What is your name?", schema=NAME_SCHEMA)
    if answer.action != "accept":
        raise ToolError("No name was given.")
    name = str((answer.content or {}).get("name", ""))[:LABEL_MAX_CHARS]
    if await tool_task_escalate(ctx, arguments={"user_name": name}):
        return _text("Continues as a task.")
    return _text(f"Hello, {name}!")


TOOLS: tuple[ToolSpec, ...] = (
    greet,
    slow_compute,
    failing_job,
    protocol_error_job,
    confirm_delete,
    multi_input,
    tool_with_task,
)
PROMPTS: tuple[str, ...] = ()


def install(server: MCPServer) -> None:
    """``test_tool_with_task`` gathers its input before it becomes a task."""
    task_escalation_register(tool=tool_with_task.name)

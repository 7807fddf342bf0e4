"""MCP tools bound into a gateway call (``InvokeRequest.mcp``): the model may call tools of the
caller's tenant, Gatehouse runs them, and the final answer comes back with the calls made.

Binding: the tools the caller's token may call are what ``tools/list`` answers them through the
pipeline (the tenant's toolsets and upstreams, the token's scopes); a named tool or toolset outside
that is refused before any model call (``InvalidInput`` naming the field), so a viewer's token
cannot bind a write tool. ``llm_invoke`` itself is never bound.

The loop: each round is one governed model call (its own usage record and ``model.called`` row,
its budget check: a budget spent mid-loop refuses the next round); each tool call the model makes
runs through the one tool pipeline (scopes, rate limits, its own ``tool.called`` audit row with the
invocation's request id, metrics), through ``run`` (the channel's: within the MCP request, or as a
pipeline call of its own for REST). A tool that is not bound, arguments that are not an object, a
tool's failure or the pipeline's refusal are told to the model, never raised. At ``max_rounds`` the
loop stops with the model's last text (``finish_reason`` ``max_rounds``); ``time_limit_seconds``
bounds the whole (``Timeout``).

Log events on ``gatehouse.llm_gateway``: ``tools_bound``, ``model_tool_calls_detected``,
``tool_execution_started``, ``tool_execution_finished`` and ``tool_execution_error``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_types import INVALID_PARAMS

from core.errors import InvalidInput, Timeout
from language_models.governed import GovernedCall, ModelUse, ToolCall, ToolCompletion, model_call
from language_models.governed.tool_messages import tool_calls_message, tool_result_message
from language_models.selectors import ModelConfig
from llm_gateway.schemas import MAX_BOUND_TOOLS, McpTools, ToolCallMade

logger = logging.getLogger("gatehouse.llm_gateway")

NEVER_BOUND = frozenset({"llm_invoke"})
DESCRIPTION_MAX_CHARS = 1_024
FUNCTION_NAME = re.compile(r"[^a-zA-Z0-9_-]")
TOOL_NOT_CALLABLE = "{name!r} is not a tool you may call (tools/list shows yours)."
TOOLSET_NOT_CALLABLE = "{name!r} is not a toolset with tools you may call."
TOO_MANY_TOOLS = f"At most {MAX_BOUND_TOOLS} tools can be bound to one call."
NOT_BOUND = "The tool {name!r} is not bound to this call; call one of the tools you were given."
TIMED_OUT = "The call with MCP tools did not finish within {seconds} s."

ToolRun = Callable[[str, dict[str, Any]], Awaitable["ToolAnswer"]]


@dataclass(frozen=True)
class ToolAnswer:
    """How a tool call went: ``text`` for the model, ``message`` for the caller's list."""

    outcome: str
    text: str
    message: str | None = None


@dataclass(frozen=True)
class BoundTool:
    name: str
    definition: dict[str, Any]


@dataclass
class LoopResult:
    """The model's last text, why the loop ended, the tool calls made, and what every round spent."""

    text: str
    finish_reason: str
    calls: list[ToolCallMade] = field(default_factory=list)
    last: GovernedCall | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None

    def add(self, governed: GovernedCall, completion: ToolCompletion) -> None:
        self.last = governed
        self.text = completion.text
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        if completion.cost is not None:
            self.cost = (self.cost or 0.0) + completion.cost


def tools_bind(
    *, listed: list[dict[str, Any]], binding: McpTools, toolsets_of: Callable[[str], frozenset[str]]
) -> dict[str, BoundTool]:
    """The tools the model may call, by the function name it sees; ``listed`` is what ``tools/list``
    answered the caller, ``toolsets_of`` the names under which a listed tool can be bound as part
    of a toolset (a built-in tool's toolset; an upstream's tool ``upstreams`` and
    ``upstreams.<name>``)."""
    callable_tools = {
        str(entry.get("name")): entry for entry in listed if entry.get("name") not in NEVER_BOUND
    }
    chosen: dict[str, dict[str, Any]] = {}
    for index, name in enumerate(binding.tools):
        entry = callable_tools.get(name)
        if entry is None:
            raise InvalidInput(TOOL_NOT_CALLABLE.format(name=name), data={"field": f"mcp.tools[{index}]"})
        chosen[name] = entry
    for index, toolset in enumerate(binding.toolsets):
        members = {name: entry for name, entry in callable_tools.items() if toolset in toolsets_of(name)}
        if not members:
            raise InvalidInput(
                TOOLSET_NOT_CALLABLE.format(name=toolset), data={"field": f"mcp.toolsets[{index}]"}
            )
        chosen.update(members)
    if len(chosen) > MAX_BOUND_TOOLS:
        raise InvalidInput(TOO_MANY_TOOLS, data={"field": "mcp"})
    bound: dict[str, BoundTool] = {}
    for name, entry in chosen.items():
        function = _function_name(name, taken=bound)
        bound[function] = BoundTool(
            name=name,
            definition={
                "type": "function",
                "function": {
                    "name": function,
                    "description": str(entry.get("description") or entry.get("title") or name)[
                        :DESCRIPTION_MAX_CHARS
                    ],
                    "parameters": entry.get("inputSchema") or {"type": "object", "properties": {}},
                },
            },
        )
    return bound


def _function_name(name: str, *, taken: dict[str, BoundTool]) -> str:
    """Providers take function names of ``[a-zA-Z0-9_-]{1,64}``; MCP's may hold dots and be longer."""
    base = FUNCTION_NAME.sub("_", name)[:60] or "tool"
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base[:57]}_{number}", number + 1
    return candidate


async def tool_conversation(
    *,
    use: ModelUse,
    config: ModelConfig,
    messages: list[dict[str, Any]],
    provider: str,
    structured: bool,
    bound: dict[str, BoundTool],
    run: ToolRun,
    binding: McpTools,
    log: Callable[..., None],
) -> LoopResult:
    """The model's conversation with the bound tools, to its answer or ``max_rounds``."""
    log(logging.INFO, "tools_bound", tools=sorted(tool.name for tool in bound.values()))
    messages = list(messages)
    definitions = [tool.definition for tool in bound.values()]
    result = LoopResult(text="", finish_reason="answered")
    try:
        async with asyncio.timeout(binding.time_limit_seconds):
            for number in range(1, binding.max_rounds + 1):
                async with model_call(
                    use=use, config=config, messages=messages, purpose="gateway", provider=provider,
                    structured=structured,
                ) as governed:  # fmt: skip
                    completion = await governed.complete_tools(tools=definitions)
                result.add(governed, completion)
                if not completion.tool_calls:
                    return result
                names = [call.name for call in completion.tool_calls]
                log(logging.INFO, "model_tool_calls_detected", round=number, tools=names)
                if number == binding.max_rounds:
                    result.finish_reason = "max_rounds"
                    return result
                messages.append(tool_calls_message(completion.text, completion.tool_calls))
                for call in completion.tool_calls:
                    answer = await _tool_answer(call, bound=bound, run=run, log=log)
                    result.calls.append(_made(number, call, bound=bound, answer=answer))
                    messages.append(tool_result_message(call, answer.text))
    except TimeoutError:
        raise Timeout(
            TIMED_OUT.format(seconds=binding.time_limit_seconds),
            data={"reason": "tool_loop_timeout", "timeoutSeconds": binding.time_limit_seconds},
        ) from None
    return result


def _made(number: int, call: ToolCall, *, bound: dict[str, BoundTool], answer: ToolAnswer) -> ToolCallMade:
    target = bound.get(call.name)
    return ToolCallMade(
        round=number,
        name=target.name if target else call.name,
        arguments=call.arguments,
        outcome=answer.outcome,  # type: ignore[arg-type]
        message=answer.message,
    )


async def _tool_answer(
    call: ToolCall, *, bound: dict[str, BoundTool], run: ToolRun, log: Callable[..., None]
) -> ToolAnswer:
    target = bound.get(call.name)
    if target is None:
        message = NOT_BOUND.format(name=call.name)
        return ToolAnswer(outcome="refused", text=message, message=message)
    if call.error is not None:
        return ToolAnswer(outcome="error", text=call.error, message=call.error)
    log(logging.INFO, "tool_execution_started", tool=target.name)
    started = time.monotonic()
    answer = await run(target.name, call.arguments)
    duration_ms = round((time.monotonic() - started) * 1000)
    if answer.outcome == "ok":
        log(logging.INFO, "tool_execution_finished", tool=target.name, duration_ms=duration_ms)
    else:
        log(
            logging.WARNING,
            "tool_execution_error",
            tool=target.name,
            outcome=answer.outcome,
            duration_ms=duration_ms,
        )
    return answer


def tool_answer_from_result(result: dict[str, Any]) -> ToolAnswer:
    """What the model reads of a tool's ``CallToolResult``: its text contents, else its structured
    content as JSON; ``isError`` makes it an error."""
    texts = [
        str(part.get("text", ""))
        for part in result.get("content") or []
        if isinstance(part, dict) and part.get("type") == "text"
    ]
    text = (
        "\n".join(texts)
        if texts
        else json.dumps(result.get("structuredContent"), ensure_ascii=False, default=str)
    )
    if result.get("isError"):
        return ToolAnswer(outcome="error", text=text, message=text[:300])
    return ToolAnswer(outcome="ok", text=text)


def tool_answer_from_error(error: dict[str, Any]) -> ToolAnswer:
    """The pipeline refused the call (scope, rate limit, invalid arguments...): the model is told."""
    message = str(error.get("message", "The call was refused."))[:300]
    # Invalid arguments are the model's mistake, to correct; anything else is a refusal.
    outcome = "error" if error.get("code") == INVALID_PARAMS else "refused"
    return ToolAnswer(outcome=outcome, text=f"{outcome.capitalize()}: {message}", message=message)

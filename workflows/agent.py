"""The agent turn: the tenant's model plans and runs commands through tool calls, one step at a time.

Each allowed command becomes one function tool; each tool call becomes command text run through
``run_command``, exactly what ``execute_command`` would run, so the agent has no way around the
parser, the scopes or the audit. The caller supplies ``run_command`` (and with it the session, the
locks and the audit); this module only loops.

What goes wrong in a step is the model's to hear, not the turn's to fail on: an unknown tool,
arguments that are not a JSON object, a parameter the command lacks, a value the syntax cannot
carry, or a command refused as invalid or out of scope all go back to the model as the tool's
result, and the loop goes on. Every tool call counts as a step, so ``max_steps`` bounds the turn
whatever the model does. Any other error (the model unreachable, a bug) ends the turn.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.errors import InsufficientScope, InvalidInput
from core.text_safety import text_cleaned
from language_models.governed import ModelUse, ToolCall, model_complete_tools
from language_models.governed.tool_messages import tool_calls_message, tool_result_message
from language_models.selectors import ModelConfig
from workflows.catalogue import CommandInfo, ParameterInfo
from workflows.command_text import CommandTextError, command_text_build
from workflows.outputs import CommandResponse, TraceEvent

PURPOSE = "workflow_agent"
HISTORY_MESSAGE_MAX_CHARS = 2_000
HISTORY_MAX_MESSAGES = 20
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")

AGENT_STOPPED = "Stopped after {steps} steps without a final answer; ask again with a narrower request."
UNKNOWN_TOOL = "There is no tool named {name!r}; call one of the tools you were given."
UNKNOWN_PARAMETERS = "{command} has no parameter {names}; its parameters are: {known}."

SYSTEM_PROMPT = """You operate the workflow "{workflow}" for the user. The current context is "{context}".
Each tool runs one command of the workflow; its answer is what the command did.
Rules:
- Use the commands to find facts and to act. Never guess data a command can give you.
- Call one command at a time when a result decides the next step.
- When a command fails, read why, correct the call, or explain the problem to the user.
- When you have what the user asked for, answer in plain language without calling a tool."""


@dataclass(frozen=True)
class AgentStep:
    """One command the agent ran (or had refused: ``success`` False, the reason in ``response_text``)."""

    qualified_name: str
    parameters: dict[str, Any]
    response: CommandResponse
    success: bool
    response_text: str


@dataclass
class AgentResult:
    final_text: str
    steps: list[AgentStep]
    traces: list[TraceEvent]
    success: bool


async def agent_run(
    *,
    use: ModelUse,
    config: ModelConfig,
    user_query: str,
    workflow_name: str,
    context: str,
    commands: Sequence[CommandInfo],
    history: Sequence[dict[str, str]],
    run_command: Callable[[str], Awaitable[AgentStep]],
    on_trace: Callable[[TraceEvent], Awaitable[None]],
    max_steps: int = 8,
) -> AgentResult:
    """Loop model → tool calls → commands until the model answers in text or ``max_steps`` calls.

    ``history`` is the conversation's prior turns as ``{"role": "user"|"assistant", "content"}``.
    ``run_command`` runs one command text and says how it went; ``InvalidInput`` and
    ``InsufficientScope`` from it are told to the model. ``on_trace`` gets each trace event as it
    happens (both directions), and the result holds them all, in order.
    """
    by_tool = agent_tool_names(commands)
    tools = [agent_tool(name, command) for name, command in by_tool.items()]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT.format(workflow=workflow_name, context=context)},
        *_history_messages(history),
        {"role": "user", "content": user_query},
    ]
    steps: list[AgentStep] = []
    traces: list[TraceEvent] = []
    used = 0

    async def trace(event: TraceEvent) -> None:
        traces.append(event)
        await on_trace(event)

    while used < max_steps:
        completion = await model_complete_tools(
            use=use, config=config, messages=messages, tools=tools, purpose=PURPOSE
        )
        if not completion.tool_calls:
            return AgentResult(
                final_text=text_cleaned(completion.text), steps=steps, traces=traces, success=True
            )
        calls = completion.tool_calls[: max_steps - used]
        messages.append(tool_calls_message(completion.text, calls))
        for call in calls:
            used += 1
            result = await _step(call, by_tool=by_tool, run_command=run_command, trace=trace, steps=steps)
            messages.append(tool_result_message(call, result))
    return AgentResult(final_text=AGENT_STOPPED.format(steps=used), steps=steps, traces=traces, success=False)


async def _step(
    call: ToolCall,
    *,
    by_tool: dict[str, CommandInfo],
    run_command: Callable[[str], Awaitable[AgentStep]],
    trace: Callable[[TraceEvent], Awaitable[None]],
    steps: list[AgentStep],
) -> str:
    """Run one tool call as a command; what the model is told about it."""
    command = by_tool.get(call.name)
    if command is None:
        return "Error: " + UNKNOWN_TOOL.format(name=call.name[:80])
    if call.error is not None:
        return "Error: " + call.error
    known = {parameter.name for parameter in command.parameters}
    unknown = sorted(str(key)[:40] for key in call.arguments if key not in known)
    if unknown:
        return "Error: " + UNKNOWN_PARAMETERS.format(
            command=command.qualified_name, names=", ".join(unknown), known=", ".join(sorted(known)) or "none"
        )
    try:
        text = command_text_build(qualified_name=command.qualified_name, arguments=call.arguments)
    except CommandTextError as refusal:
        return f"Error: {refusal}"
    parameters = {key: value for key, value in call.arguments.items() if value is not None}
    await trace(_event("agent_to_workflow", text, command.qualified_name, parameters, "", True))
    try:
        step = await run_command(text)
    except (InvalidInput, InsufficientScope) as refused:
        message = refused.message
        if refused.data:
            message += " " + json.dumps(refused.data, ensure_ascii=False, default=str)
        step = AgentStep(
            qualified_name=command.qualified_name,
            parameters=parameters,
            response=CommandResponse(response=message),
            success=False,
            response_text=message,
        )
    steps.append(step)
    await trace(
        _event(
            "workflow_to_agent", text, step.qualified_name, step.parameters, step.response_text, step.success
        )
    )
    return step.response_text if step.success else f"Error: {step.response_text}"


def agent_tool_names(commands: Sequence[CommandInfo]) -> dict[str, CommandInfo]:
    """Each command under a tool name providers accept: ``context__Name`` when it fits and is free,
    else a shortened name with a hash of the qualified name."""
    names: dict[str, CommandInfo] = {}
    seen: set[str] = set()
    for command in commands:
        if command.qualified_name in seen:
            continue
        seen.add(command.qualified_name)
        name = re.sub(r"[^a-zA-Z0-9_-]", "_", command.qualified_name.replace("/", "__"))
        if not TOOL_NAME.match(name) or name in names:
            digest = hashlib.sha256(command.qualified_name.encode("utf-8", "replace")).hexdigest()
            base = name[:52]
            name, counter = f"{base}_{digest[:11]}", 1
            while name in names:
                name, counter = f"{base}_{digest[:8]}_{counter}", counter + 1
        names[name] = command
    return names


def agent_tool(name: str, command: CommandInfo) -> dict[str, Any]:
    """The OpenAI function-tool definition of one command."""
    description = command.description
    if command.examples:
        description += "\nExamples: " + "; ".join(command.examples[:3])
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{command.qualified_name}: {description}"[:1_000],
            "parameters": {
                "type": "object",
                "properties": {parameter.name: _schema(parameter) for parameter in command.parameters},
                "required": [parameter.name for parameter in command.parameters if parameter.required],
            },
        },
    }


def _schema(parameter: ParameterInfo) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "format": "date"} if parameter.type == "date" else {}
    if not schema:
        schema["type"] = parameter.type if parameter.type in ("integer", "number", "boolean") else "string"
    if parameter.description:
        schema["description"] = parameter.description[:500]
    if isinstance(parameter.default, str | int | float | bool):
        schema["default"] = parameter.default
    return schema


def _history_messages(history: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    messages = []
    for item in list(history)[-HISTORY_MAX_MESSAGES:]:
        role = item.get("role")
        content = item.get("content")
        if role in ("user", "assistant") and isinstance(content, str) and content:
            messages.append({"role": role, "content": content[:HISTORY_MESSAGE_MAX_CHARS]})
    return messages


def _event(
    direction: Literal["agent_to_workflow", "workflow_to_agent"],
    raw_command: str,
    command_name: str,
    parameters: dict[str, Any],
    response_text: str,
    success: bool,
) -> TraceEvent:
    return TraceEvent(
        timestamp=int(time.time() * 1000),
        direction=direction,
        raw_command=raw_command,
        command_name=command_name,
        parameters=parameters,
        response_text=response_text,
        success=success,
    )

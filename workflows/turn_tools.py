"""The workflow tools that run commands, each one turn of the active conversation:
``execute_command`` (exact command syntax), ``invoke_assistant`` (one request mapped to one command)
and ``invoke_agent`` (the tenant's model plans over the session's commands)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from conversations.models import REQUEST_MAX_CHARS, TurnKind
from conversations.selectors import conversation_turn_digest
from core.conf import gatehouse_settings
from core.db import db_call
from core.errors import InvalidInput
from core.identity import Identity
from core.text_safety import text_unstorable_reason
from language_models.governed import Feature, ModelUse
from language_models.selectors import ModelConfig, NoModelConfigured, language_model_for_tenant
from mcp_gateway.kernel.registry import default_registry, tool
from mcp_gateway.kernel.tool_results import tool_result
from mcp_gateway.kernel.toolset_access import toolsets_enabled
from mcp_gateway.pipeline.client_log import client_log
from workflows.agent import AgentStep, agent_run
from workflows.assistant import AssistantMapping, assistant_map_plain, assistant_map_with_model
from workflows.execution import CommandRun, ResolvedCommand, command_resolve, command_run
from workflows.outputs import CommandOutput, CommandResponse, TraceEvent
from workflows.scopes import SCOPE_WORKFLOWS_AGENT, SCOPE_WORKFLOWS_RUN
from workflows.session_tools import visible_commands
from workflows.syntax import COMMAND_MAX_CHARS
from workflows.turns import TURN_TIMEOUT_MAX_SECONDS, TurnState, trace_pair, turn_run

AGENT_NO_MODEL = (
    "No language model is configured for this tenant, so invoke_agent cannot plan. An operator can add "
    "one in the admin: Language models (/admin/language_models/languagemodel/). execute_command and "
    "invoke_assistant work without one."
)
UNMAPPED = "The request could not be mapped to one command: {reason}"
AGENT_STEPS_MAX = 8
AGENT_DATA_MAX_CHARS = 6_000

TimeoutSeconds = Annotated[
    float,
    Field(gt=0, le=TURN_TIMEOUT_MAX_SECONDS, description="The turn's time limit, in seconds."),
]
UserQuery = Annotated[str, Field(min_length=1, max_length=REQUEST_MAX_CHARS)]


def _query_checked(user_query: str) -> str:
    """The request, refused (-32602) when it is blank or could not be stored in the conversation."""
    reason = text_unstorable_reason(user_query)
    if reason is not None or not user_query.strip():
        raise InvalidInput(
            f"user_query {reason or 'is blank'}.", data={"argument": "user_query", "reason": "user_query"}
        )
    return user_query


def _execute_timeout() -> float:
    # A command may run a query, whose own limit ends it first with a clearer message.
    return float(gatehouse_settings.DATA_AGENT_QUERY_TIMEOUT_SECONDS) + 10


def output_result(output: CommandOutput) -> CallToolResult:
    """The output as structured content and the same JSON as text; no ``traces`` key when they were
    streamed."""
    structured = output.model_dump(mode="json", exclude={"traces"} if output.traces is None else set())
    first = output.command_responses[0].response if output.command_responses else ""
    if output.command_name:
        summary = f"{output.command_name} {'ok' if output.success else 'failed'}: {first}"
    else:
        # Nothing ran (no command matched): what the turn says is the whole story.
        summary = first or "No command ran."
    return tool_result(structured=structured, summary=[summary[:500]])


def _resolve(*, identity: Identity, text: str, context: str) -> ResolvedCommand:
    enabled = toolsets_enabled(tenant_id=identity.tenant_id, registry=default_registry())
    return command_resolve(
        text=text,
        tenant_id=identity.tenant_id,
        context=context,
        granted=identity.scopes,
        enabled_toolsets=enabled,
    )


async def _run_text(*, ctx: Context, identity: Identity, state: TurnState, text: str, via: str) -> CommandRun:
    """Resolve and run one command text in the turn's current context, moving the turn's context."""
    resolved = await db_call(_resolve, identity=identity, text=text, context=state.context)
    run = await command_run(resolved=resolved, ctx=ctx, identity=identity, context=state.context, via=via)
    state.context = run.context_after
    return run


def _output(
    *,
    workflow_name: str,
    state: TurnState,
    run: CommandRun | None,
    responses: list[CommandResponse],
    success: bool,
) -> CommandOutput:
    return CommandOutput(
        success=success,
        workflow_name=workflow_name,
        context=state.context,
        command_name=run.qualified_name if run is not None else "",
        command_parameters=run.parameters if run is not None else {},
        command_responses=responses,
        traces=state.traces,
    )


def _one_command_output(*, workflow_name: str, state: TurnState, text: str, run: CommandRun) -> CommandOutput:
    """The answer of a turn that ran one command, with that command's two trace events."""
    state.traces.extend(
        trace_pair(
            raw_command=text,
            command_name=run.qualified_name,
            parameters=run.parameters,
            response_text=run.response.response,
            success=run.success,
        )
    )
    return _output(
        workflow_name=workflow_name, state=state, run=run, responses=[run.response], success=run.success
    )


@tool(
    name="execute_command",
    title="Run one workflow command",
    description=(
        "Run one command in the command syntax: context/Name <param>value</param> ... (get_commands lists "
        "them, with examples). Values are converted to the declared types; a malformed or unknown command, "
        "or a missing or ill-typed parameter, is refused with what is wrong and the expected form."
    ),
    scopes=[SCOPE_WORKFLOWS_RUN],
    read_only=False,
    timeout_seconds=lambda: _execute_timeout() + 20,
    # What a command runs is limited as it would be directly: a tool command by that tool's own
    # limit, a query by the data agent's caps on queries running at once.
)
async def execute_command(
    ctx: Context, command: Annotated[str, Field(min_length=1, max_length=COMMAND_MAX_CHARS)]
) -> Annotated[CallToolResult, CommandOutput]:
    async def body(state: TurnState) -> CommandOutput:
        identity = state.bound.caller.identity
        name = state.bound.workflow.name
        run = await _run_text(ctx=ctx, identity=identity, state=state, text=command, via="execute_command")
        return _one_command_output(workflow_name=name, state=state, text=command, run=run)

    output = await turn_run(
        ctx=ctx, kind=TurnKind.COMMAND, request=command, timeout_seconds=_execute_timeout(), body=body
    )
    return output_result(output)


async def _model_for(*, identity: Identity) -> ModelConfig | None:
    """The tenant's model when the caller may use it (``workflows:agent``), else None."""
    if SCOPE_WORKFLOWS_AGENT not in identity.scopes:
        return None
    try:
        return await db_call(language_model_for_tenant, tenant_id=identity.tenant_id)
    except NoModelConfigured:
        return None


@tool(
    name="invoke_assistant",
    title="Run one request as one command",
    description=(
        "Take a request as an imperative instruction and run exactly one command for it. A request in the "
        "command syntax, or naming a command and its parameters unambiguously, runs without a language "
        "model; otherwise the tenant's model (if you may use it) maps it. A request that cannot be mapped "
        "gets success false with the closest commands."
    ),
    scopes=[SCOPE_WORKFLOWS_RUN],
    read_only=False,
    timeout_seconds=TURN_TIMEOUT_MAX_SECONDS + 30,
    # One command at most, limited as execute_command's; the model call, if any, is one.
)
async def invoke_assistant(
    ctx: Context, user_query: UserQuery, timeout_seconds: TimeoutSeconds = 60
) -> Annotated[CallToolResult, CommandOutput]:
    _query_checked(user_query)

    async def body(state: TurnState) -> CommandOutput:
        identity = state.bound.caller.identity
        name = state.bound.workflow.name
        query = user_query.strip().removeprefix("/").strip()
        commands = await visible_commands(tenant_id=identity.tenant_id, context=None, granted=identity.scopes)
        config = await _model_for(identity=identity)
        mapping: AssistantMapping = assistant_map_plain(query=query, commands=commands)
        if mapping.command_text is None and config is not None:
            mapping = await assistant_map_with_model(
                use=ModelUse(identity=identity, feature=Feature.INVOKE_ASSISTANT),
                config=config,
                query=query,
                commands=commands,
                context=state.context,
            )
        if mapping.command_text is None:
            response = CommandResponse(
                response=UNMAPPED.format(reason=mapping.reason),
                next_actions=list(mapping.close_commands),
                recommendations=["Run one of the close commands with execute_command, or rephrase."],
            )
            return _output(workflow_name=name, state=state, run=None, responses=[response], success=False)
        try:
            run = await _run_text(
                ctx=ctx, identity=identity, state=state, text=mapping.command_text, via="invoke_assistant"
            )
        except InvalidInput as error:
            # The mapping named a command the workflow refuses: the person's request, not a client bug.
            response = CommandResponse(
                response=f"{error.message} (mapped to: {mapping.command_text})",
                artifacts={"error": error.data or {}},
                next_actions=list(mapping.close_commands),
            )
            state.traces.extend(
                trace_pair(
                    raw_command=mapping.command_text,
                    command_name="",
                    parameters={},
                    response_text=error.message,
                    success=False,
                )
            )
            return _output(workflow_name=name, state=state, run=None, responses=[response], success=False)
        return _one_command_output(workflow_name=name, state=state, text=mapping.command_text, run=run)

    output = await turn_run(
        ctx=ctx, kind=TurnKind.ASSISTANT, request=user_query, timeout_seconds=timeout_seconds, body=body
    )
    return output_result(output)


def _for_the_model(run: CommandRun) -> str:
    """What the agent's model reads of a command's answer: its words, then its data as compact JSON
    (bounded: the agent bounds the tool message again)."""
    artifacts = run.response.artifacts
    if not artifacts:
        return run.response.response
    data = json.dumps(artifacts, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{run.response.response}\n{data[:AGENT_DATA_MAX_CHARS]}"


def _history(turns: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The conversation so far, as short messages for the agent's context."""
    messages: list[dict[str, str]] = []
    for turn in turns[-10:]:
        messages.append({"role": "user", "content": str(turn.get("request", ""))[:1000]})
        outcome = "succeeded" if turn.get("success") else "failed"
        messages.append(
            {"role": "assistant", "content": f"Ran {turn.get('command_name') or 'no command'}: {outcome}."}
        )
    return messages


@tool(
    name="invoke_agent",
    title="Hand a request to the workflow's agent",
    description=(
        "The tenant's language model plans and runs the commands your request needs (at most "
        f"{AGENT_STEPS_MAX} steps). With a progress token, each step is sent while the turn runs (a "
        "progress notification and a log notification carrying the trace event) and the result has no "
        "traces; without one, the traces are in the result."
    ),
    scopes=[SCOPE_WORKFLOWS_RUN, SCOPE_WORKFLOWS_AGENT],
    read_only=False,
    timeout_seconds=TURN_TIMEOUT_MAX_SECONDS + 30,
    expensive=True,
)
async def invoke_agent(
    ctx: Context, user_query: UserQuery, timeout_seconds: TimeoutSeconds = 60
) -> Annotated[CallToolResult, CommandOutput]:
    _query_checked(user_query)
    progress_token = (ctx.request_context.meta or {}).get("progress_token")
    streaming = progress_token is not None

    async def body(state: TurnState) -> CommandOutput:
        identity = state.bound.caller.identity
        try:
            config = await db_call(language_model_for_tenant, tenant_id=identity.tenant_id)
        except NoModelConfigured:
            raise NoModelConfigured(AGENT_NO_MODEL) from None
        name = state.bound.workflow.name
        commands = await visible_commands(tenant_id=identity.tenant_id, context=None, granted=identity.scopes)
        history = _history(
            await db_call(conversation_turn_digest, conversation_id=state.bound.conversation_id)
        )
        runs: list[CommandRun] = []

        async def on_trace(event: TraceEvent) -> None:
            state.traces.append(event)
            if streaming:
                arrow = "→" if event.direction == "agent_to_workflow" else "←"
                await ctx.report_progress(
                    len(state.traces), None, f"{arrow} {event.command_name or event.raw_command}"[:200]
                )
                await client_log(ctx, "info", {"type": "workflow_trace", **event.model_dump(mode="json")})

        async def run_command(text: str) -> AgentStep:
            run = await _run_text(ctx=ctx, identity=identity, state=state, text=text, via="invoke_agent")
            runs.append(run)
            return AgentStep(
                qualified_name=run.qualified_name,
                parameters=run.parameters,
                response=run.response,
                success=run.success,
                response_text=_for_the_model(run),
            )

        result = await agent_run(
            use=ModelUse(identity=identity, feature=Feature.INVOKE_AGENT),
            config=config,
            user_query=user_query,
            workflow_name=name,
            context=state.context,
            commands=commands,
            history=history,
            run_command=run_command,
            on_trace=on_trace,
            max_steps=AGENT_STEPS_MAX,
        )
        responses = [run.response for run in runs] + [CommandResponse(response=result.final_text)]
        output = _output(
            workflow_name=name,
            state=state,
            run=runs[-1] if runs else None,
            responses=responses,
            success=result.success,
        )
        return output

    output = await turn_run(
        ctx=ctx, kind=TurnKind.AGENT, request=user_query, timeout_seconds=timeout_seconds, body=body
    )
    if streaming:
        output = output.model_copy(update={"traces": None})
    return output_result(output)

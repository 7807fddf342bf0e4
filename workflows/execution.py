"""One workflow command, from its text to its answer: ``command_resolve`` then ``command_run``.

``execute_command``, the assistant and the agent all come through here, so a command means the same
whoever typed it. Resolving is synchronous (it reads the workflow through the ORM: call it with
``core.db.db_call``) and says exactly what is wrong with a text (-32602 with ``data.problem``), or
refuses a command the caller may see but not run (-32001). Running is asynchronous and leaves an
audit event for the command, and for a tool command the tool's own event as well
(``workflows.command_runs``).
"""

from __future__ import annotations

import asyncio
import difflib
import time
from dataclasses import dataclass
from datetime import date
from typing import Any

from mcp.server.mcpserver import Context

from core.audit.trail import audit_entry, audit_record_async
from core.errors import InsufficientScope, InvalidInput, PermissionDenied, RateLimited
from core.identity import Identity
from core.models import AuditAction, AuditOutcome
from core.text_safety import storable_text, text_unstorable_reason
from data_agent.query_pool import QuerySource
from data_agent.query_tool import query_source_for
from data_agent.sql_gate import sql_gate_check
from data_agent.sql_parameters import sql_placeholders
from mcp_gateway.kernel.identity import session_id_from_context
from workflows import syntax
from workflows.builtins import builtin_run
from workflows.catalogue import (
    CommandInfo,
    WorkflowView,
    command_requirements,
    command_visible,
    commands_all,
    expected_form,
    parameters_described,
    unknown_context,
)
from workflows.command_runs import error_code, query_command_run, tool_command_run
from workflows.models import ActionKind, Builtin
from workflows.outputs import CommandResponse

CLOSE_COMMANDS = 5
# A refusal (scope, rate limit) is "denied" in the audit trail, as for a direct call.
_REFUSALS = frozenset({PermissionDenied.jsonrpc_code, RateLimited.jsonrpc_code})
ECHO_MAX_CHARS = 200


@dataclass(frozen=True)
class ResolvedCommand:
    """A command ready to run: its parameters coerced (dates as ``date``), defaults filled."""

    text: str
    command: CommandInfo
    parameters: dict[str, Any]
    workflow: WorkflowView
    # The commands the caller may run in the command's context (what list_commands answers).
    visible: tuple[CommandInfo, ...]
    # A query's data source (its URL carries credentials: never log it) and the parameters it binds.
    source: QuerySource | None = None
    bound: tuple[str, ...] = ()

    @property
    def context(self) -> str:
        return self.command.context


@dataclass(frozen=True)
class CommandRun:
    qualified_name: str
    parameters: dict[str, Any]  # JSON-safe: dates as ISO strings
    success: bool
    response: CommandResponse
    context_after: str


def _echo(text: str) -> str:
    return storable_text(text[:ECHO_MAX_CHARS])[0]


def _refuse(
    text: str, problem: str, message: str, *, command: CommandInfo | None = None, **data: Any
) -> InvalidInput:
    detail: dict[str, Any] = {"command": _echo(text), "problem": problem, "detail": message, **data}
    if command is not None:
        detail["expected"] = expected_form(command)
        detail["parameters"] = parameters_described(command)
        detail["examples"] = list(command.examples)
    else:
        detail.setdefault("expected", syntax.EXPECTED_FORM)
    return InvalidInput(message, data=detail)


def command_resolve(
    *, text: str, tenant_id: int, context: str, granted: frozenset[str], enabled_toolsets: frozenset[str]
) -> ResolvedCommand:
    """``text`` as a command of the tenant's workflow this caller may run (synchronous: the ORM).

    ``context`` is the session's current one; a command of another context may be named and runs
    there. InvalidInput (-32602) with ``data.problem``: malformed, unknown_context, unknown_command,
    unknown_parameter, missing_parameter, invalid_value; InsufficientScope (-32001) for a command
    the caller's role may not run; NotFound (-32002) without a workflow, or for a query whose
    ontology is gone or not ready (as data_agent answers run_query).
    """
    if not isinstance(text, str):
        raise _refuse("", "malformed", f"The command must be text; expected {syntax.EXPECTED_FORM}.")
    reason = text_unstorable_reason(text)
    if reason:
        raise _refuse(text, "malformed", f"The command {reason}.")
    try:
        parsed = syntax.command_parse(text=text.strip())
    except syntax.CommandSyntaxError as error:
        raise _refuse(text, "malformed", str(error)) from None
    try:
        view, commands = commands_all(tenant_id=tenant_id, context=parsed.context)
    except InvalidInput as error:
        # An unknown context: the same command in the session's context is the likeliest meant.
        data = dict(error.data or {})
        close = _same_name_in(context, parsed.name, tenant_id, granted, enabled_toolsets)
        raise _refuse(
            text, "unknown_context", error.message, contexts=data.get("contexts", []), closeCommands=close
        ) from None
    visible = [c for c in commands if command_visible(c, granted=granted, enabled_toolsets=enabled_toolsets)]
    command = next((c for c in commands if c.qualified_name == parsed.qualified_name), None)
    if command is None or not _toolset_enabled(command, enabled_toolsets):
        raise _unknown_command(text, parsed.qualified_name, visible)
    if command not in visible:
        # Seen in the workflow but beyond the caller's role: refused as a direct call would be.
        raise InsufficientScope(required=command.scopes, missing=command.scopes - granted)
    parameters = _parameters(text, command, parsed.arguments, view)
    source, bound = _query_source(command, tenant_id=tenant_id)
    return ResolvedCommand(
        text=text,
        command=command,
        parameters=parameters,
        workflow=view,
        visible=tuple(visible),
        source=source,
        bound=bound,
    )


def _same_name_in(
    context: str, name: str, tenant_id: int, granted: frozenset[str], enabled_toolsets: frozenset[str]
) -> list[str]:
    try:
        _, commands = commands_all(tenant_id=tenant_id, context=context)
    except InvalidInput:
        return []
    return [
        c.qualified_name
        for c in commands
        if c.name.lower() == name.lower()
        and command_visible(c, granted=granted, enabled_toolsets=enabled_toolsets)
    ]


def _toolset_enabled(command: CommandInfo, enabled_toolsets: frozenset[str]) -> bool:
    requirements = command_requirements(command.action) if command.action is not None else None
    return requirements is None or requirements[1] is None or requirements[1] in enabled_toolsets


def _unknown_command(text: str, name: str, visible: list[CommandInfo]) -> InvalidInput:
    names = [c.qualified_name for c in visible]
    close = difflib.get_close_matches(name, names, n=CLOSE_COMMANDS, cutoff=0.5)
    # Same name in another case, or in another context: the likeliest slips.
    close += [n for n in names if n.lower() == name.lower() and n not in close]
    message = f"There is no command {name[:100]} you can run."
    if close:
        message += f" Did you mean {' or '.join(close)}?"
    return _refuse(text, "unknown_command", message, closeCommands=close)


def _parameters(
    text: str, command: CommandInfo, arguments: dict[str, str], view: WorkflowView
) -> dict[str, Any]:
    declared = {p.name: p for p in command.parameters}
    unknown = [name for name in arguments if name not in declared]
    if unknown:
        raise _refuse(
            text,
            "unknown_parameter",
            f"{command.qualified_name} has no parameter {', '.join(unknown)}; it takes"
            f" {', '.join(declared) or 'none'}.",
            command=command,
        )
    missing = [p.name for p in command.parameters if p.required and p.name not in arguments]
    if missing:
        raise _refuse(
            text,
            "missing_parameter",
            f"{command.qualified_name} needs {', '.join(missing)}; expected {expected_form(command)}.",
            command=command,
            missing=missing,
        )
    values: dict[str, Any] = {}
    for p in command.parameters:
        raw = arguments.get(p.name)
        if raw is None and p.default is None:
            continue
        try:
            values[p.name] = syntax.value_coerce(
                raw=raw if raw is not None else _default_text(p.default), type_name=p.type
            )
        except ValueError as error:
            raise _refuse(
                text,
                "invalid_value",
                f"{p.name} of {command.qualified_name}: {error}.",
                command=command,
                parameter=p.name,
            ) from None
    if command.action is not None and command.action.builtin == Builtin.GO_TO_CONTEXT:
        target = str(values.get("context", "")).strip()
        if view.context(target) is None:
            refusal = unknown_context(name=target, view=view)
            raise _refuse(
                text,
                "unknown_context",
                refusal.message,
                command=command,
                contexts=[c.name for c in view.contexts],
            )
        values["context"] = target
    return values


def _default_text(default: Any) -> str:
    # YAML gives true/false as booleans; value_coerce reads their text.
    return str(default).lower() if isinstance(default, bool) else str(default)


def _query_source(command: CommandInfo, *, tenant_id: int) -> tuple[QuerySource | None, tuple[str, ...]]:
    action = command.action
    if action is None or action.kind != ActionKind.QUERY:
        return None, ()
    # NotFound for an ontology deleted since, not ready, or never this tenant's, as for run_query.
    source = query_source_for(tenant_id=tenant_id, ontology_id=action.ontology_id or "")
    gated = sql_gate_check(sql=action.sql, dialect=source.kind, allowed_tables=source.allowed_tables)
    return source, tuple(sorted(sql_placeholders(gated=gated)))


def json_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, date) else v for k, v in parameters.items()}


async def command_run(
    *, resolved: ResolvedCommand, ctx: Context, identity: Identity, context: str, via: str
) -> CommandRun:
    """Run ``resolved`` for ``identity`` and audit it (``workflow.command``, target the qualified
    name). ``context`` is the session's before the command; ``via`` names the outer tool
    (execute_command, invoke_assistant, invoke_agent). A tool's own failure (``isError``,
    ``ToolError``, arguments its schema refuses) is ``success=False``. Errors raised (rate limits,
    scopes, timeouts, a query refused) are audited with their code and re-raised: a
    ``GatehouseError``, or for a tool command the ``MCPError`` the tool's guard already made."""
    command = resolved.command
    action = command.action
    parameters = json_parameters(resolved.parameters)
    session_id = session_id_from_context(ctx) or ""
    detail: dict[str, Any] = {"via": via, "parameters": parameters, "contextBefore": context}
    outcome = AuditOutcome.OK
    success = False
    started = time.perf_counter()
    try:
        context_after = resolved.context
        if action is None or action.kind == ActionKind.BUILTIN:
            response, context_after = builtin_run(
                builtin=action.builtin if action else "",
                context=resolved.context,
                parameters=resolved.parameters,
                workflow=resolved.workflow,
                visible=resolved.visible,
            )
            success = True
        elif action.kind == ActionKind.QUERY:
            assert resolved.source is not None  # resolved with its source
            values = {name: resolved.parameters.get(name) for name in resolved.bound}
            response, noted = await query_command_run(
                source=resolved.source, sql=action.sql, values=values, identity=identity
            )
            detail.update(noted)
            success = True
        else:
            arguments = {
                argument: parameters[parameter]
                for argument, parameter in action.tool_arguments
                if parameter in parameters
            }
            detail["tool"] = action.tool_name
            success, response = await tool_command_run(
                ctx=ctx,
                tool_name=action.tool_name,
                arguments=arguments,
                qualified_name=command.qualified_name,
            )
        if not success:
            outcome = AuditOutcome.ERROR
        detail["contextAfter"] = context_after
        return CommandRun(
            qualified_name=command.qualified_name,
            parameters=parameters,
            success=success,
            response=response,
            context_after=context_after,
        )
    except asyncio.CancelledError:
        outcome = AuditOutcome.ERROR
        detail["cancelled"] = True
        raise
    except Exception as error:
        outcome = AuditOutcome.DENIED if error_code(error) in _REFUSALS else AuditOutcome.ERROR
        detail["code"] = error_code(error)
        detail["message"] = str(error)[:500]
        raise
    finally:
        detail["success"] = success
        await audit_record_async(
            audit_entry(
                action=AuditAction.WORKFLOW_COMMAND,
                outcome=outcome,
                identity=identity,
                session_id=session_id,
                target=command.qualified_name,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                detail=detail,
            )
        )

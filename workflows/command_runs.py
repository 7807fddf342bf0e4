"""What a command runs: a parameterised query through data_agent's fair-use pool, or a tool through
the SDK server with every check a client's direct call of it would get.

A query command is ``run_query`` with bound parameters: the same gate, limits, lineage and answer.
A tool command is the tool itself: the tenant's toolsets, the caller's scopes and the tool's rate
limit are checked here (the request middleware saw only the outer tool), then the SDK validates
the arguments and runs the guarded handler. The tool leaves its own ``tool.called`` event (with
``via`` naming the command), as the audit trail's middleware would have written it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from core.audit import audit_arguments, audit_entry, audit_record_async
from core.errors import GatehouseError, InsufficientScope, InvalidInput
from core.identity import Identity
from core.models import AuditAction, AuditOutcome, RateLimitScope
from core.ratelimit import rate_limit_mcp
from data_agent.query_pool import QuerySource, query_run_fairly
from data_agent.query_slots import QueryCaller
from data_agent.query_tool import query_summary
from mcp_gateway.audit_trail import NOTE_MAX_CHARS, audit_failure, audit_notes_apart
from mcp_gateway.guard import UNKNOWN_TOOL
from mcp_gateway.registry import default_registry
from mcp_gateway.sdk import context_call_tool
from mcp_gateway.toolset_access import toolsets_enabled_async
from workflows.outputs import CommandResponse

NEEDS_INPUT = "The tool asked for more input, which a workflow command cannot give it."


def error_code(error: BaseException) -> int:
    """The JSON-RPC code a raised error reaches the client with."""
    if isinstance(error, MCPError):
        return error.error.code
    if isinstance(error, GatehouseError):
        return error.jsonrpc_code
    return GatehouseError.jsonrpc_code


async def query_command_run(
    *, source: QuerySource, sql: str, values: Mapping[str, Any], identity: Identity
) -> tuple[CommandResponse, dict[str, Any]]:
    """The query's answer, shaped as ``run_query``'s, and what its audit event records."""
    caller = QueryCaller(tenant_id=identity.tenant_id, user_id=identity.user_id)
    run = await query_run_fairly(caller=caller, source=source, sql=sql, params=values)
    result, lineage = run.result, run.lineage
    artifacts = {
        "columns": result.columns,
        "rows": result.rows,
        "rowCount": result.row_count,
        "truncated": result.truncated,
        "sql": run.gated.sql,
        "lineage": lineage,
    }
    summary = query_summary(result, [d["name"] for d in lineage["datasets"]])
    noted = {
        "sql": run.gated.sql[:NOTE_MAX_CHARS],
        "rowCount": result.row_count,
        "truncated": result.truncated,
    }
    return CommandResponse(response=summary, artifacts=artifacts), noted


async def tool_command_run(
    *,
    ctx: Context,
    identity: Identity,
    session_id: str,
    tool_name: str,
    arguments: dict[str, Any],
    qualified_name: str,
) -> tuple[bool, CommandResponse]:
    """Whether the tool succeeded and its answer (its text; its structured content as artifacts).

    The tool's own failure (``isError``, ``ToolError``, arguments its schema refuses) is a failed
    command; a refusal (toolset, scope, rate limit) or an error the guard translated is raised, as
    ``MCPError`` or ``GatehouseError``. Either way the tool's event is written first."""
    registry = default_registry()
    spec = registry.get(tool_name)
    action, outcome = AuditAction.TOOL_CALLED, AuditOutcome.OK
    detail: dict[str, Any] = {
        "method": "tools/call",
        "arguments": audit_arguments(arguments, secret_names=spec.secret_arguments if spec else frozenset()),
        "via": f"workflow:{qualified_name}",
    }
    notes: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        if spec is None or registry.toolset_of_tool(tool_name) not in await toolsets_enabled_async(
            tenant_id=identity.tenant_id, registry=registry
        ):
            raise InvalidInput(f"{UNKNOWN_TOOL}: {tool_name}", data={"tool": tool_name})
        missing = spec.scopes - identity.scopes
        if missing:
            raise InsufficientScope(required=spec.scopes, missing=missing)
        await rate_limit_mcp(
            identity=identity, scope=RateLimitScope.TOOL, target=tool_name, expensive=spec.expensive
        )
        with audit_notes_apart() as notes:
            try:
                result = await context_call_tool(ctx=ctx, name=tool_name, arguments=arguments)
            except UnexpectedToolError:
                raise
            except ToolError as error:
                # Meant for the caller (or its model) to read and act on, as a direct call's isError.
                outcome = AuditOutcome.ERROR
                detail["isError"] = True
                return False, CommandResponse(response=str(error)[:NOTE_MAX_CHARS])
        if not isinstance(result, CallToolResult):
            outcome = AuditOutcome.ERROR
            detail["isError"] = True
            return False, CommandResponse(response=NEEDS_INPUT)
        text = "\n".join(
            str(getattr(c, "text", "")) for c in result.content if getattr(c, "type", "") == "text"
        )
        if result.is_error:
            outcome = AuditOutcome.ERROR
            detail["isError"] = True
        return not result.is_error, CommandResponse(
            response=text, artifacts=dict(result.structured_content or {})
        )
    except (MCPError, GatehouseError) as error:
        action, outcome = audit_failure(
            action=action,
            code=error_code(error),
            message=error.error.message if isinstance(error, MCPError) else error.message,
            data=error.error.data if isinstance(error, MCPError) else error.data,
            scope=RateLimitScope.TOOL,
            detail=detail,
        )
        raise
    except asyncio.CancelledError:
        outcome = AuditOutcome.ERROR
        detail["cancelled"] = True
        raise
    except Exception:
        outcome = AuditOutcome.ERROR
        detail["code"] = GatehouseError.jsonrpc_code
        raise
    finally:
        if notes:
            detail["result"] = notes
        await audit_record_async(
            audit_entry(
                action=action,
                outcome=outcome,
                identity=identity,
                session_id=session_id,
                target=tool_name,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                detail=detail,
            )
        )

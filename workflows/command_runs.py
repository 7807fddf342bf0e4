"""What a command runs: a parameterised query through data_agent's fair-use pool, or a tool through
the pipeline every tool call passes.

A query command is ``run_query`` with bound parameters: the same gate, limits, lineage and answer.
A tool command is the tool itself, run by ``mcp_gateway.pipeline.tool_runs`` as the command's
caller: the tenant's toolsets, the caller's scopes, the arguments and the tool's rate limit are
checked there, and the tool leaves its own ``tool.called`` event (``via`` naming the command).
Nothing here repeats a check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult

from core.errors import GatehouseError
from core.identity import Identity
from data_agent.query_pool import QuerySource, query_run_fairly
from data_agent.query_slots import QueryCaller
from data_agent.query_tool import query_answer
from mcp_gateway.pipeline.audit_trail import NOTE_MAX_CHARS
from mcp_gateway.pipeline.tool_runs import tool_run_within
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
    answer, summary = query_answer(result=run.result, lineage=run.lineage, sql=run.gated.sql)
    noted = {
        "sql": run.gated.sql[:NOTE_MAX_CHARS],
        "rowCount": answer.rowCount,
        "truncated": answer.truncated,
    }
    return CommandResponse(response=summary, artifacts=answer.model_dump(mode="json")), noted


async def tool_command_run(
    *,
    ctx: Context,
    tool_name: str,
    arguments: dict[str, Any],
    qualified_name: str,
) -> tuple[bool, CommandResponse]:
    """Whether the tool succeeded and its answer (its text; its structured content as artifacts).

    The tool runs through the pipeline as a client's call of it would (``tool_run_within``), which
    checks, limits and audits it (``via`` naming the command). The tool's own failure (``isError``)
    and arguments the tool's schema refuses are a failed command; a refusal (toolset, scope, rate
    limit) or an error the pipeline translated is raised as ``MCPError``."""
    try:
        result = await tool_run_within(
            ctx=ctx, name=tool_name, arguments=arguments, via=f"workflow:{qualified_name}"
        )
    except MCPError as error:
        if error.error.code == INVALID_PARAMS and _arguments_refused(error):
            # Meant for the caller (or its model) to read and correct, as a tool's own error is.
            return False, CommandResponse(response=error.error.message[:NOTE_MAX_CHARS])
        raise
    if not isinstance(result, CallToolResult):
        return False, CommandResponse(response=NEEDS_INPUT)
    text = "\n".join(str(getattr(c, "text", "")) for c in result.content if getattr(c, "type", "") == "text")
    return not result.is_error, CommandResponse(
        response=text, artifacts=dict(result.structured_content or {})
    )


def _arguments_refused(error: MCPError) -> bool:
    data = error.error.data
    return isinstance(data, dict) and "errors" in data

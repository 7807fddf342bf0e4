"""How a gateway call's bound MCP tools run, per channel, always through the one tool pipeline:
inside the ``llm_invoke`` tool's own MCP request (the same caller, session and client; the tool's
audit row says ``via`` ``llm_invoke``), or, for ``POST /api/v1/llm/invoke``, as a pipeline call of
its own for the same caller under the REST request's id (``via`` ``llm/invoke``). Neither channel
has a person to ask: a tool that needs an answer from one is told to the model as an error."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import InputRequiredResult

from core.identity import Identity
from llm_gateway.tool_loop import ToolAnswer, ToolRun, tool_answer_from_error, tool_answer_from_result
from mcp_gateway.pipeline.tool_runs import tool_call_run, tool_run_within

NEEDS_A_PERSON = "The tool needs an answer from a person, which a model's tool call cannot ask for."


def tool_run_for_api(*, identity: Identity, request_id: str) -> ToolRun:
    async def run(name: str, arguments: dict[str, Any]) -> ToolAnswer:
        answer = await tool_call_run(
            identity=identity,
            task_id=request_id,
            tool=name,
            arguments=arguments,
            client_capabilities={},
            request_id=request_id,
            via="llm/invoke",
        )
        if answer.error is not None:
            return tool_answer_from_error(answer.error)
        result = answer.result or {}
        if result.get("resultType") == "input_required":
            return ToolAnswer(outcome="error", text=NEEDS_A_PERSON, message=NEEDS_A_PERSON)
        return tool_answer_from_result(result)

    return run


def tool_run_for_mcp(*, ctx: Context) -> ToolRun:
    async def run(name: str, arguments: dict[str, Any]) -> ToolAnswer:
        try:
            result = await tool_run_within(ctx=ctx, name=name, arguments=arguments, via="llm_invoke")
        except MCPError as error:
            return tool_answer_from_error({"code": error.error.code, "message": error.error.message})
        if isinstance(result, InputRequiredResult):
            return ToolAnswer(outcome="error", text=NEEDS_A_PERSON, message=NEEDS_A_PERSON)
        return tool_answer_from_result(result.model_dump(by_alias=True, mode="json", exclude_none=True))

    return run

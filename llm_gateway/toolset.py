"""The ``llm_gateway`` toolset: the REST API's ``/llm/invoke`` as the MCP tool ``llm_invoke``.

Same arguments (the fields of ``InvokeRequest``, with the same bounds), same result
(``InvokeResponse``, as structured content and as its JSON text), same service
(``llm_gateway.invoke``): so the same budgets, usage records and errors, the errors in the MCP
error table (a spent budget is -32029 with ``retryAfterSeconds``, a provider's failure -32005 or
-32003, a reply that breaks the schema -32005 with ``reason``). The endpoint's guard checks the
scope and counts the call against the tool's rate limit, the same counter the REST call uses, and
its audit trail writes the ``tool.called`` row. There is no header over MCP, so only the tenant's
stored keys are used.

Off until a tenant turns it on (``manage.py toolsets``), like every toolset that spends money.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from llm_gateway.invoke import llm_gateway_invoke
from llm_gateway.schemas import MAX_OUTPUT_TOKENS, InvokeRequest, InvokeResponse, McpTools, Message
from llm_gateway.scopes import SCOPE_LLM_INVOKE
from llm_gateway.tool_channels import tool_run_for_mcp
from mcp_gateway.kernel.identity import identity_from_context
from mcp_gateway.kernel.registry import Toolset, tool

_FIELDS = InvokeRequest.model_fields
# The backstop only: a model's own timeout (at most 600 s, language_models.models) ends the call
# first, with its own message.
TOOL_TIMEOUT_SECONDS = 630.0


@tool(
    name="llm_invoke",
    title="Call a language model",
    description=(
        "Call one of your tenant's language models through Gatehouse (its stored keys, budgets and "
        "rate limits): provider and model (such as openai and gpt-4o-mini), chat messages, and "
        "optionally a JSON Schema the output must match (response_schema), temperature, max_tokens "
        "and provider options (extra). Returns the output (parsed JSON when it is JSON), token usage, "
        "cost and the call's id. The same contract as POST /api/v1/llm/invoke."
    ),
    scopes=[SCOPE_LLM_INVOKE],
    read_only=False,
    # The usual tool limit: the tenant's budgets cap what calls cost (as on /api/v1/llm/invoke).
    timeout_seconds=TOOL_TIMEOUT_SECONDS,
)
async def llm_invoke(
    provider: Annotated[str, _FIELDS["provider"]],
    model: Annotated[str, _FIELDS["model"]],
    messages: Annotated[list[Message], _FIELDS["messages"]],
    ctx: Context,
    response_schema: Annotated[
        dict[str, Any] | None, Field(description=_FIELDS["response_schema"].description)
    ] = None,
    temperature: Annotated[float | None, Field(ge=0, le=2)] = None,
    max_tokens: Annotated[int | None, Field(ge=1, le=MAX_OUTPUT_TOKENS)] = None,
    extra: Annotated[dict[str, Any] | None, Field(description=_FIELDS["extra"].description)] = None,
    mcp: Annotated[McpTools | None, Field(description=_FIELDS["mcp"].description)] = None,
) -> InvokeResponse:
    request = InvokeRequest(
        provider=provider,
        model=model,
        messages=messages,
        response_schema=response_schema,
        temperature=temperature,
        max_tokens=max_tokens,
        extra=extra or {},
        mcp=mcp,
    )
    return await llm_gateway_invoke(
        identity=identity_from_context(ctx),
        request=request,
        header_key=None,
        channel="mcp",
        run_tool=tool_run_for_mcp(ctx=ctx),
    )


toolset = Toolset(
    name="llm_gateway",
    description="Your tenant's language models, called through Gatehouse's keys, budgets and audit.",
    tools=(llm_invoke,),
    enabled_by_default=False,
)

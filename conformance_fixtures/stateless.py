"""Fixtures of the conformance suite's 2026-07-28 ``server-stateless`` and ``json-schema-2020-12``
scenarios (part of the ``conformance`` toolset, ``conformance_fixtures.toolset``).

Each goes through what every tool uses, so the suite checks the server, not the fixture:
``client_sample`` and ``client_elicit`` refuse a 2026-07-28 request whose client did not declare the
capability with -32021 (``client_capabilities``); ``client_log`` sends nothing to a request that set
no log level; a question for the user on 2026-07-28 leaves in the result (``InputRequiredResult``),
never as a request on the response stream; and the list-change triggers switch the
``conformance_dynamic`` toolset for the caller's tenant as an operator would, so the change reaches
``subscriptions/listen`` streams through the database like any other (``list_changes``).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    ClientCapabilities,
    ContentBlock,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

from accounts.models import Tenant
from accounts.scopes import SCOPE_READ, SCOPE_WRITE
from conformance_fixtures import dynamic as conformance_dynamic
from core.db import db_call
from mcp_gateway.kernel.client_capabilities import client_capability_missing, client_speaks_per_request
from mcp_gateway.kernel.identity import identity_from_context
from mcp_gateway.kernel.registry import ToolSpec, default_registry, tool
from mcp_gateway.kernel.sdk import server_tool_schema_set
from mcp_gateway.kernel.toolset_access import toolset_set_enabled
from mcp_gateway.models import TenantToolset
from mcp_gateway.pipeline.client_log import client_log
from mcp_gateway.pipeline.client_requests import (
    NO_ELICITATION,
    client_elicit,
    client_offers_forms,
    client_sample,
)

STREAMING_INPUT = "confirmation"
STREAMING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirmed": {"type": "boolean", "description": "Go ahead?"}},
    "required": ["confirmed"],
}
JSON_SCHEMA_2020_12_NAME = "json_schema_2020_12_tool"
JSON_SCHEMA_2020_12_URI = "https://json-schema.org/draft/2020-12/schema"
# Published verbatim: the scenario checks each keyword survives (SEP-1613, SEP-2106).
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": JSON_SCHEMA_2020_12_URI,
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _fixture(name: str, description: str) -> Any:
    return tool(name=name, description=description, scopes=[SCOPE_READ], structured=False)


@_fixture("test_missing_capability", "Asks the client's model; needs the sampling capability.")
async def test_missing_capability(ctx: Context) -> list[ContentBlock]:
    answer = await client_sample(ctx, prompt="Say hello.", max_tokens=20)
    return [TextContent(type="text", text=f"LLM response: {answer}")]


@_fixture("test_streaming_elicitation", "Asks the user to confirm, the way the protocol version allows.")
async def test_streaming_elicitation(ctx: Context) -> list[ContentBlock] | InputRequiredResult:
    message = "Please confirm to continue."
    if not client_speaks_per_request(ctx):
        answer = await client_elicit(ctx, message=message, schema=STREAMING_SCHEMA)
        return [_confirmation(answer)]
    reply = (ctx.input_responses or {}).get(STREAMING_INPUT)
    if isinstance(reply, ElicitResult):
        return [_confirmation(reply)]
    if not client_offers_forms(ctx):
        raise client_capability_missing(
            ctx,
            required=ClientCapabilities(elicitation=ElicitationCapability()),
            name="elicitation",
            fallback=NO_ELICITATION,
        )
    # No request of the server's own on the response stream: the question is the result.
    request = ElicitRequestFormParams(message=message, requested_schema=STREAMING_SCHEMA)
    return InputRequiredResult(input_requests={STREAMING_INPUT: ElicitRequest(params=request)})


def _confirmation(answer: ElicitResult) -> TextContent:
    return TextContent(type="text", text=f"Confirmation: action={answer.action}, content={answer.content}")


@_fixture("test_logging_tool", "Logs three messages, to a client that asked for them.")
async def test_logging_tool(ctx: Context) -> list[ContentBlock]:
    for text in ("Logging tool started", "Logging tool working", "Logging tool finished"):
        await client_log(ctx, "info", text)
    return [TextContent(type="text", text="Logging tool executed")]


def _trigger(name: str, description: str) -> Any:
    # They change the tenant's configuration: not for a read-only token (a viewer's).
    return tool(name=name, description=description, scopes=[SCOPE_WRITE], read_only=False, structured=False)


@_trigger(
    "test_trigger_tool_change",
    "Switches the conformance_dynamic toolset for this tenant, which changes its tool list.",
)
async def test_trigger_tool_change(ctx: Context) -> list[ContentBlock]:
    return [await _switch_dynamic(ctx)]


@_trigger(
    "test_trigger_prompt_change",
    "Switches the conformance_dynamic toolset for this tenant, which changes its prompt list.",
)
async def test_trigger_prompt_change(ctx: Context) -> list[ContentBlock]:
    return [await _switch_dynamic(ctx)]


async def _switch_dynamic(ctx: Context) -> TextContent:
    identity = identity_from_context(ctx)
    try:
        enabled = await db_call(_switch, tenant_id=identity.tenant_id)
    except ValueError as error:  # a deployment that does not serve the dynamic toolset
        raise ToolError(str(error)) from None
    state = "on" if enabled else "off"
    return TextContent(type="text", text=f"The {conformance_dynamic.NAME} toolset is now {state}.")


def _switch(*, tenant_id: int) -> bool:
    """Turns the dynamic toolset the other way for the tenant, as ``manage.py toolsets`` does."""
    row = TenantToolset.objects.filter(tenant_id=tenant_id, toolset=conformance_dynamic.NAME).first()
    enabled = not (row.enabled if row is not None else conformance_dynamic.toolset.enabled_by_default)
    toolset_set_enabled(
        tenant=Tenant.objects.get(pk=tenant_id),
        toolset=conformance_dynamic.NAME,
        enabled=enabled,
        registry=default_registry(),
    )
    return enabled


@_fixture(JSON_SCHEMA_2020_12_NAME, "Tool with JSON Schema 2020-12 features")
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> list[ContentBlock]:
    how = f"{contactMethod or 'any'} ({phone if contactMethod == 'phone' else email})"
    return [TextContent(type="text", text=f"ok: {name or 'someone'}, contact by {how}")]


TOOLS: tuple[ToolSpec, ...] = (
    test_missing_capability,
    test_streaming_elicitation,
    test_logging_tool,
    test_trigger_tool_change,
    test_trigger_prompt_change,
    json_schema_2020_12_tool,
)
PROMPTS: tuple[str, ...] = ()


def install(server: MCPServer) -> None:
    """The 2020-12 fixture publishes its schema as the suite wrote it (the request guard validates
    calls against it)."""
    server_tool_schema_set(server=server, name=JSON_SCHEMA_2020_12_NAME, schema=JSON_SCHEMA_2020_12)

"""Ask the client something in the middle of a tool call: its model (sampling) or its user
(elicitation). The request rides the call's own response; the answer comes back through the relay,
whichever worker it reaches (``transport.exchange_handshake_era``, ``transport.relay``)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import NoBackChannelError
from mcp_types import (
    ClientCapabilities,
    ElicitationCapability,
    ElicitResult,
    SamplingCapability,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import is_version_at_least

from mcp_gateway.kernel.client_capabilities import client_capability_missing

NO_SAMPLING = "This client does not offer sampling, so the tool cannot ask its model."
NO_ELICITATION = "This client does not offer elicitation, so the tool cannot ask its user."
INPUT_REQUIRED_VERSION = "2026-07-28"
NO_BACK_CHANNEL = (
    "Asking the client mid-call needs an MCP session (protocol 2025-11-25 or older); this request has none."
)


async def client_sample(ctx: Context, *, prompt: str, max_tokens: int) -> str:
    """The client's model's answer to ``prompt``, as text."""
    session = ctx.request_context.session
    required = ClientCapabilities(sampling=SamplingCapability())
    if not session.check_client_capability(required):
        raise client_capability_missing(ctx, required=required, name="sampling", fallback=NO_SAMPLING)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    try:
        result = await session.create_message(
            [message], max_tokens=max_tokens, related_request_id=ctx.request_context.request_id
        )
    except NoBackChannelError:
        raise ToolError(NO_BACK_CHANNEL) from None
    content = result.content
    blocks = content if isinstance(content, list) else [content]
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


async def client_elicit(ctx: Context, *, message: str, schema: dict[str, Any]) -> ElicitResult:
    """The user's answer to a form: ``action`` (accept, decline, cancel) and ``content``."""
    reply = await _elicit(ctx, message=message, schema=schema)
    if reply == NO_ELICITATION:
        # This call cannot go on without the user: on 2026-07-28 the whole request is refused.
        required = ClientCapabilities(elicitation=ElicitationCapability())
        raise client_capability_missing(ctx, required=required, name="elicitation", fallback=NO_ELICITATION)
    if isinstance(reply, str):
        raise ToolError(reply)
    return reply


async def client_elicit_optional(
    ctx: Context, *, message: str, schema: dict[str, Any]
) -> ElicitResult | None:
    """Like ``client_elicit``, but None where the user cannot be asked (no elicitation capability,
    or a protocol version without a back-channel), so a tool can fall back to asking in its result."""
    reply = await _elicit(ctx, message=message, schema=schema)
    return None if isinstance(reply, str) else reply


async def _elicit(ctx: Context, *, message: str, schema: dict[str, Any]) -> ElicitResult | str:
    """The user's answer, or why they cannot be asked mid-call."""
    session = ctx.request_context.session
    if not session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability())):
        return NO_ELICITATION
    try:
        return await session.elicit_form(message, schema, related_request_id=ctx.request_context.request_id)
    except NoBackChannelError:
        return NO_BACK_CHANNEL


def client_asks_between_calls(ctx: Context) -> bool:
    """True from protocol 2026-07-28 on, where nothing can be asked mid-call: a tool returns an
    ``InputRequiredResult`` and the answers come with the client's next call."""
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION)


def client_offers_forms(ctx: Context) -> bool:
    """Whether the client said it fills in elicitation forms (a bare ``elicitation: {}``, from
    before modes existed, means forms)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)

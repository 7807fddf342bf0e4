"""What a request may rely on from its client: the capabilities it declared.

From protocol 2026-07-28 every request declares its client's capabilities in
``_meta['io.modelcontextprotocol/clientCapabilities']``, and a request that truly needs one the
client left out is refused as a whole: JSON-RPC -32021 (MissingRequiredClientCapability), whose
``data.requiredCapabilities`` names what was missing, answered with HTTP 400 (the SDK's transport
maps the code). Older versions have no such error: there the tool says so in its result
(``ToolError``), as it always has. Tools that can do without the client (``client_elicit_optional``)
never come here.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import ClientCapabilities, MissingRequiredClientCapabilityErrorData
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

MISSING_CAPABILITY = "This request needs the client's {name} capability, which the client did not declare."


def client_speaks_per_request(ctx: Context) -> bool:
    """Whether this request stands alone (2026-07-28 and later): it carries its own capabilities
    and log level in ``_meta``, and nothing can be asked of the client mid-call."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def client_capability_missing(
    ctx: Context, *, required: ClientCapabilities, name: str, fallback: str
) -> Exception:
    """What to raise when the request needs ``required`` and the client did not declare it:
    -32021 on 2026-07-28, else a ``ToolError`` saying ``fallback`` (the tool's result)."""
    if not client_speaks_per_request(ctx):
        return ToolError(fallback)
    return capability_missing_error(required=required, name=name)


def capability_missing_error(*, required: ClientCapabilities, name: str) -> MCPError:
    """JSON-RPC -32021 naming ``required`` (the protocol's ``MissingRequiredClientCapabilityError``;
    HTTP 400 on 2026-07-28)."""
    data = MissingRequiredClientCapabilityErrorData(required_capabilities=required)
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=MISSING_CAPABILITY.format(name=name),
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )

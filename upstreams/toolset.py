"""The ``upstreams`` toolset: a tenant's other MCP servers (``models.Upstream``), served with
Gatehouse's login, consent, scopes, rate limits and audit trail. It has no tools of its own; its
federation publishes the upstreams' entries. Enabled for every tenant: a tenant with no upstream
sees nothing of it, and an operator turns a tenant's upstreams off all at once by disabling it."""

from __future__ import annotations

from mcp_gateway.kernel.registry import Toolset
from upstreams.federation import UpstreamFederation

federation = UpstreamFederation()

toolset = Toolset(
    name="upstreams",
    description="The tenant's other MCP servers, behind Gatehouse.",
    federation=federation,
)

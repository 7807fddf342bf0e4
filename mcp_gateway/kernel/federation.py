"""Tools, resources and prompts a tenant brings from elsewhere: what a toolset that federates other
MCP servers (``upstreams``) offers the endpoint, so the endpoint serves them without knowing where
they come from.

A toolset with a ``federation`` adds entries to the tenant's lists and answers the requests that
name them. The request guard treats a federated entry as it treats a local tool: the tenant's
toolsets, the caller's scopes, argument validation against the published input schema, the rate
limit, and the audit trail all apply before ``forward`` is called. A local name always wins: a
federation never shadows a tool, resource or prompt of the server itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from mcp.server.context import ServerRequestContext

from core.identity import Identity

Kind = Literal["tool", "resource", "resource_template", "prompt"]

# The key under which each kind's entries travel in a list result.
LIST_KEYS: dict[Kind, str] = {
    "tool": "tools",
    "resource": "resources",
    "resource_template": "resourceTemplates",
    "prompt": "prompts",
}
LIST_METHODS: dict[str, Kind] = {
    "tools/list": "tool",
    "resources/list": "resource",
    "resources/templates/list": "resource_template",
    "prompts/list": "prompt",
}


@dataclass(frozen=True, slots=True)
class FederatedItem:
    """One entry a federation publishes, as the tenant's clients see it."""

    kind: Kind
    # The tool or prompt name clients use, the resource's URI, or the template's URI template.
    name: str
    # The listing entry, as the client receives it (a tool's name already prefixed, say).
    payload: dict[str, Any]
    # What a caller needs to see or use it.
    scopes: frozenset[str]
    # Where it comes from (the upstream's name): audit rows, metrics and errors name it.
    source: str
    federation: Federation
    # The federation's own handle on where the entry comes from (compared by identity only).
    origin: Any = field(default=None, compare=False)


class Federation(Protocol):
    async def items(self, *, identity: Identity, kind: Kind) -> list[FederatedItem]:
        """Every entry of ``kind`` the caller's tenant has, whatever the caller's scopes (the
        guard filters by scope). A source that cannot be reached contributes nothing."""
        ...

    async def resolve(self, *, identity: Identity, kind: Kind, name: str) -> FederatedItem | None:
        """The entry a ``tools/call`` (``kind="tool"``), ``resources/read`` (``"resource"``: the
        URI may match a listed resource or a template) or ``prompts/get`` names, or None."""
        ...

    async def forward(
        self,
        *,
        item: FederatedItem,
        identity: Identity,
        params: dict[str, Any],
        ctx: ServerRequestContext[Any, Any],
    ) -> dict[str, Any]:
        """Serve the request for ``item``; returns the result as the client receives it. Raises
        ``core.errors`` exceptions (an unreachable source is ``Unavailable``) or ``MCPError``."""
        ...

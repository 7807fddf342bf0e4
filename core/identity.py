"""Who is calling: the person, tenant, role, scopes and OAuth client behind one bearer token.

Resolved once per HTTP request by whichever endpoint authenticated it (the MCP endpoint today, the
REST API next) and handed down explicitly; the audit trail and the rate limits read it, so it lives
at the bottom, free of any endpoint's transport.
"""

from __future__ import annotations

from dataclasses import dataclass

# The client id of a stdio session's identity (``mcp_gateway.transport.stdio``): no OAuth client, no
# token; the person at the terminal started it.
STDIO_CLIENT_ID = "stdio"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling: resolved from the bearer token once per HTTP request, never cached globally."""

    user_id: int
    username: str
    tenant_id: int
    tenant_slug: str
    tenant_name: str
    role: str
    scopes: frozenset[str]
    application_id: int
    client_id: str
    client_name: str
    token_id: int

    @property
    def over_stdio(self) -> bool:
        """A local stdio session, not a bearer token: what a refusal tells the person differs."""
        return self.client_id == STDIO_CLIENT_ID and self.token_id == 0

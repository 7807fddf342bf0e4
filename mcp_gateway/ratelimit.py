"""Rate limits shared by every worker (placeholder: the rate-limit work fills this in).

Contract used by the rest of the code:

* ``await rate_limit_mcp(identity=..., scope=RateLimitScope.TOOL, target=tool_name, expensive=...)``
  counts one MCP call for (tenant, user, target) and raises ``errors.RateLimited`` when over.
* ``rate_limit_http(scope=RateLimitScope.LOGIN, key=...)`` does the same, synchronously, for pages
  and OAuth endpoints keyed by client address (and username for logins).
"""

from __future__ import annotations

from mcp_gateway.identity import Identity
from mcp_gateway.models import RateLimitScope


async def rate_limit_mcp(
    *, identity: Identity, scope: RateLimitScope, target: str, expensive: bool = False
) -> None:
    """Count one call; raise RateLimited when the caller is over the limit that applies."""


def rate_limit_http(*, scope: RateLimitScope, key: str) -> None:
    """Count one request for ``key``; raise RateLimited when over the limit that applies."""

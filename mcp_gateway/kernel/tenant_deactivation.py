"""A deactivated tenant's MCP sessions end when the tenant is saved inactive.

``accounts`` cannot know about sessions (it sits below ``mcp_gateway``), so the one place a tenant
is switched off by hand, a save (the admin's checkbox), is followed here: a receiver that calls
the service and nothing else. Tokens need nothing of this: the hot path refuses a deactivated
tenant's token on its next request (``tokens``). A bulk ``update()`` sends no signal; the
periodic purge (``session_purge``) ends those sessions instead.
"""

from __future__ import annotations

from typing import Any

from accounts.models import Tenant
from mcp_gateway.kernel.sessions import session_terminate_for_inactive_tenants


def tenant_saved(sender: type[Tenant], instance: Tenant, **kwargs: Any) -> None:
    if not instance.is_active:
        session_terminate_for_inactive_tenants(tenant_id=instance.pk)

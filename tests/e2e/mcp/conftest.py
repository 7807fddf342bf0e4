"""Fixtures of the MCP end-to-end tests: a raw 2026-07-28 caller of a tenant of its own."""

from __future__ import annotations

import httpx
import pytest

from accounts.models import Role
from mcp_gateway.models import TenantToolset
from tests.e2e.mcp.modern_caller import Caller
from tests.support.factories import AccessTokenFactory, MembershipFactory


@pytest.fixture
async def http():
    async with httpx.AsyncClient(timeout=httpx.Timeout(30)) as client:
        yield client


@pytest.fixture
def caller(committed, http, server):
    """A caller of a tenant of its own, with the toolsets given on for that tenant."""

    def make(
        *, role: str = Role.ADMIN, scope: str = "mcp:read mcp:write", tenant=None, toolsets=()
    ) -> Caller:
        membership = committed(MembershipFactory, role=role, **({"tenant": tenant} if tenant else {}))
        for name in toolsets:
            committed(
                lambda name=name: TenantToolset.objects.update_or_create(
                    tenant=membership.tenant, toolset=name, defaults={"enabled": True}
                )
            )
        token = committed(AccessTokenFactory, membership=membership, scope=scope, resource=[server.mcp_url])
        made = Caller(http, token.token)
        made.tenant = membership.tenant  # type: ignore[attr-defined]
        made.membership = membership  # type: ignore[attr-defined]
        return made

    return make

"""A deactivated tenant stops at once at /mcp: its tokens are refused on their next request, and its
live sessions end (audited), so reactivating the tenant does not revive them."""

from __future__ import annotations

import pytest

from accounts.models import Tenant
from core.models import AuditAction, AuditEvent
from mcp_gateway.models import McpSession, TerminationReason
from oauth.bearer import TOKEN_TENANT_INACTIVE
from tests.e2e.conftest import _in_own_thread
from tests.e2e.raw_mcp import RawMcp
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenant_switch(django_db_blocker):
    """Save a tenant active or not, as the admin's checkbox does, where the servers see it."""

    def switch(tenant_id: int, *, active: bool) -> None:
        def save() -> None:
            tenant = Tenant.objects.get(pk=tenant_id)
            tenant.is_active = active
            tenant.save()

        with django_db_blocker.unblock():
            _in_own_thread(save)

    return switch


@pytest.fixture
async def member(server, committed):
    membership = committed(MembershipFactory)
    token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url])
    raw = RawMcp(token.token)
    yield membership, raw
    await raw.aclose()


async def test_a_deactivated_tenant_s_token_is_refused_on_its_next_request(server, member, tenant_switch):
    membership, raw = member
    session_id = await raw.initialize(server.mcp_url)
    assert (await raw.request(server.mcp_url, "ping", session_id=session_id)).status_code == 200

    tenant_switch(membership.tenant_id, active=False)

    refused = await raw.request(server.mcp_url, "ping", session_id=session_id)
    assert refused.status_code == 401
    assert refused.json()["error_description"] == TOKEN_TENANT_INACTIVE
    fresh = await raw.http.post(
        server.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers=raw.headers(),
    )
    assert fresh.status_code == 401


async def test_a_deactivated_tenant_s_sessions_end_and_stay_ended(server, member, tenant_switch):
    membership, raw = member
    session_id = await raw.initialize(server.mcp_url)

    tenant_switch(membership.tenant_id, active=False)

    session = await McpSession.objects.aget(pk=session_id)
    assert session.terminated_at is not None
    assert session.termination_reason == TerminationReason.TENANT
    ended = await AuditEvent.objects.aget(session_id=session_id, action=AuditAction.SESSION_TERMINATED)
    assert ended.detail == {"reason": "tenant"}
    assert ended.tenant_id == membership.tenant_id

    tenant_switch(membership.tenant_id, active=True)

    # The token works again; the session it had does not come back.
    again = await raw.request(server.mcp_url, "ping", session_id=session_id)
    assert again.status_code == 404
    assert await raw.initialize(server.mcp_url) != session_id

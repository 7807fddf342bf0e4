"""One person holds at most MCP_SESSIONS_PER_PERSON live sessions (kernel.sessions.session_open):
one more is refused with the standalone stream's error (-32000, HTTP 429) and an audit row, and
nothing is stored for it. Ended and idle sessions free their places; colleagues are not affected."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from config.asgi import application
from core.errors import TooManyOpen
from core.models import AuditAction, AuditEvent
from mcp_gateway.kernel.identity_cache import identity_cache
from mcp_gateway.kernel.sessions import TOO_MANY_SESSIONS, session_new_id, session_open, session_terminate
from mcp_gateway.models import McpSession, TerminationReason
from tests.e2e.raw_mcp import initialize_body, sse_messages
from tests.support.factories import AccessTokenFactory, MembershipFactory, UserFactory
from tests.support.identity_cache_support import identity_cache_stop
from tests.support.workflow_support import identity_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def three_each(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "MCP_SESSIONS_PER_PERSON": 3}


def _open(identity) -> McpSession:
    return session_open(
        session_id=session_new_id(),
        identity=identity,
        protocol_version="2025-11-25",
        client_name="loop",
        client_version="1",
        client_capabilities={},
    )


def test_the_fourth_live_session_is_refused_with_an_audit_row_and_nothing_stored(owner):
    identity = identity_for(owner)
    opened = [_open(identity) for _ in range(3)]
    with pytest.raises(TooManyOpen) as refused:
        _open(identity)
    assert (refused.value.jsonrpc_code, refused.value.http_status) == (-32000, 429)
    assert refused.value.message == TOO_MANY_SESSIONS
    assert refused.value.data == {"reason": "sessions_per_person", "limit": 3}
    assert McpSession.objects.filter(user=owner.user).count() == 3
    [row] = AuditEvent.objects.filter(action=AuditAction.RATE_LIMITED)
    assert (row.target, row.detail, row.user_id) == (
        "initialize",
        {"reason": "sessions_per_person", "limit": 3},
        owner.user_id,
    )
    # An ended session and an idle one free their places.
    session_terminate(session_id=opened[0].id, reason=TerminationReason.CLIENT)
    _open(identity)
    McpSession.objects.filter(pk=opened[1].pk).update(last_seen=timezone.now() - timedelta(days=2))
    _open(identity)
    with pytest.raises(TooManyOpen):
        _open(identity)


def test_a_colleague_and_the_same_person_in_another_tenant_count_apart_from_the_tenant(owner):
    identity = identity_for(owner)
    for _ in range(3):
        _open(identity)
    colleague = MembershipFactory(user=UserFactory(username="colleague"), tenant=owner.tenant, role="admin")
    for _ in range(3):
        _open(identity_for(colleague))
    # The bound is the person's, all tenants and clients together.
    elsewhere = MembershipFactory(user=owner.user, role="admin")
    with pytest.raises(TooManyOpen):
        _open(identity_for(elsewhere))


@pytest.fixture
async def in_process_endpoint():
    yield application
    await identity_cache_stop(identity_cache)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_hot_path_pool")
async def test_a_client_past_the_bound_gets_the_error_on_initialize_and_no_session_header(
    owner, in_process_endpoint
):
    token = await sync_to_async(AccessTokenFactory)(
        membership=owner, scope="mcp:read mcp:write", resource=[settings.MCP_RESOURCE_URL]
    )
    body = initialize_body()
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {token.token}"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=in_process_endpoint), base_url=settings.PUBLIC_URL
    ) as client:
        answers = [await client.post(settings.MCP_PATH, json=body, headers=headers) for _ in range(4)]
    assert ["mcp-session-id" in answer.headers for answer in answers] == [True, True, True, False]
    [message] = sse_messages(answers[-1])
    assert message["error"] == {
        "code": -32000,
        "message": TOO_MANY_SESSIONS,
        "data": {"reason": "sessions_per_person", "limit": 3},
    }
    assert await McpSession.objects.filter(user_id=owner.user_id).acount() == 3

"""MCP sessions are database rows: any worker serves any session, and ending one ends it everywhere."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from accounts.models import Tenant, User
from mcp_gateway.models import McpSession
from tests.e2e.harness import ACME_ADMIN_TOOLS, RESEARCH_TOOLS, Person, RoundRobin
from tests.e2e.oauth_driver import access_token, minted_sdk_client, minted_token
from tests.e2e.raw_mcp import RawMcp
from tests.support.factories import (
    DEFAULT_PASSWORD,
    AccessTokenFactory,
    ApplicationFactory,
    MembershipFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
async def alice(server, committed):
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    yield raw
    await raw.aclose()


@pytest.fixture
async def alice_by_oauth(server):
    """alice with a token from the OAuth flow, for a test that looks at the client it registered."""
    raw = RawMcp(await access_token(server, Person("alice")))
    yield raw
    await raw.aclose()


async def test_initialize_records_who_opened_the_session_and_how(server, alice_by_oauth):
    session_id = await alice_by_oauth.initialize(server.mcp_url, client_name="recorder")

    session = await McpSession.objects.select_related("user", "tenant", "application").aget(pk=session_id)
    assert session.user.username == "alice"
    assert session.tenant.slug == "acme"
    assert session.application.name == "Gatehouse denial tests"
    assert session.scopes == "mcp:read mcp:write"
    assert session.protocol_version == "2025-11-25"
    assert (session.client_name, session.client_version) == ("recorder", "9.9")
    assert session.terminated_at is None
    assert len(session_id) >= 43
    assert all(0x21 <= ord(char) <= 0x7E for char in session_id), "visible ASCII only"


async def test_a_session_opened_on_one_worker_is_served_by_another(server, second_server, alice):
    session_id = await alice.initialize(server.mcp_url)

    listed = await alice.result(second_server.mcp_url, "tools/list", session_id=session_id)
    called = await alice.result(
        second_server.mcp_url, "tools/call", {"name": "whoami"}, session_id=session_id
    )

    # mcp:read and mcp:write: the account tools and the research toolset the demo turns on.
    assert {tool["name"] for tool in listed["tools"]} == {"whoami", "set_display_name", *RESEARCH_TOOLS}
    assert called["structuredContent"]["user"]["username"] == "alice"


async def test_delete_on_either_worker_ends_the_session_on_both(server, second_server, alice):
    session_id = await alice.initialize(server.mcp_url)

    ended = await alice.http.delete(second_server.mcp_url, headers=alice.headers(session_id))
    first = await alice.request(server.mcp_url, "tools/list", session_id=session_id)
    second = await alice.request(second_server.mcp_url, "tools/list", session_id=session_id)

    assert ended.status_code == 204
    assert (first.status_code, second.status_code) == (404, 404)
    session = await McpSession.objects.aget(pk=session_id)
    assert session.terminated_at is not None
    assert session.termination_reason == "client"


async def test_killing_a_worker_mid_session_loses_nothing(doomed_server, second_server, committed):
    raw = RawMcp(minted_token(committed, doomed_server, Person("alice")))
    try:
        session_id = await raw.initialize(doomed_server.mcp_url)
        before = await raw.result(
            doomed_server.mcp_url, "tools/call", {"name": "whoami"}, session_id=session_id
        )
        doomed_server.kill()
        after = await raw.result(
            second_server.mcp_url, "tools/call", {"name": "whoami"}, session_id=session_id
        )
    finally:
        await raw.aclose()
    assert after["structuredContent"] == before["structuredContent"]


async def test_the_sdk_client_works_through_a_round_robin_balancer(server, second_server, committed):
    balancer = RoundRobin([server.port, second_server.port])
    async with minted_sdk_client(committed, server, Person("alice"), transport=balancer) as (client, _):
        results = [await client.call_tool("whoami", {}) for _ in range(4)]
        tools = await client.list_tools()
    assert all(r.structured_content and r.structured_content["user"]["username"] == "alice" for r in results)
    assert {tool.name for tool in tools.tools} == ACME_ADMIN_TOOLS
    assert set(balancer.served) == {server.port, second_server.port}


def _age(session_id: str, seconds: int) -> None:
    McpSession.objects.filter(pk=session_id).update(last_seen=timezone.now() - timedelta(seconds=seconds))


async def test_an_idle_session_expires_and_answers_404(server, alice):
    session_id = await alice.initialize(server.mcp_url)
    await sync_to_async(_age)(session_id, 3601)

    response = await alice.request(server.mcp_url, "tools/list", session_id=session_id)

    assert response.status_code == 404
    session = await McpSession.objects.aget(pk=session_id)
    assert session.termination_reason == "expired"


async def test_a_request_without_a_session_id_is_refused(server, alice):
    await alice.initialize(server.mcp_url)
    response = await alice.request(server.mcp_url, "tools/list")
    assert response.status_code == 400
    assert "Missing session ID" in response.text


async def test_an_unknown_session_id_answers_404(server, alice):
    response = await alice.request(server.mcp_url, "tools/list", session_id="no-such-session")
    assert response.status_code == 404


async def test_a_session_opens_its_standalone_stream_and_other_methods_are_refused(server, alice):
    """The stream itself is tested in test_mcp_standalone_stream; here, that GET opens one."""
    session_id = await alice.initialize(server.mcp_url)
    headers = alice.headers(session_id, accept="text/event-stream")
    async with alice.http.stream("GET", server.mcp_url, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
    patched = await alice.http.patch(server.mcp_url, headers=alice.headers(session_id), content=b"{}")
    assert patched.status_code == 405
    assert patched.headers["allow"] == "GET, POST, DELETE"


async def test_another_supported_protocol_version_header_is_tolerated(server, alice):
    """The conformance suite sends 2025-03-26 after a 2025-11-25 handshake; only unsupported
    versions are refused."""
    session_id = await alice.initialize(server.mcp_url)
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
    older = await alice.http.post(
        server.mcp_url,
        json=listing,
        headers=alice.headers(session_id, **{"mcp-protocol-version": "2025-03-26"}),
    )
    bogus = await alice.http.post(
        server.mcp_url,
        json=listing,
        headers=alice.headers(session_id, **{"mcp-protocol-version": "1999-01-01"}),
    )
    assert older.status_code == 200
    assert bogus.status_code == 400


async def test_a_2024_client_without_a_version_header_keeps_its_negotiated_version(server, alice):
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    }
    versionless = {k: v for k, v in alice.headers().items() if k != "mcp-protocol-version"}
    opened = await alice.http.post(server.mcp_url, json=body, headers=versionless)
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    headers = {**versionless, "mcp-session-id": session_id}
    listed = await alice.http.post(
        server.mcp_url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        headers=headers,
    )
    assert listed.status_code == 200, listed.text
    assert (await McpSession.objects.aget(pk=session_id)).protocol_version == "2024-11-05"


async def test_deactivating_a_user_stops_their_sessions_at_once(server, committed):
    tenant = await Tenant.objects.aget(slug="acme")
    eve = committed(UserFactory, username="eve")
    committed(MembershipFactory, user=eve, tenant=tenant, role="admin")
    raw = RawMcp(minted_token(committed, server, Person("eve", password=DEFAULT_PASSWORD)))
    try:
        session_id = await raw.initialize(server.mcp_url)
        await User.objects.filter(pk=eve.pk).aupdate(is_active=False)
        response = await raw.request(server.mcp_url, "tools/list", session_id=session_id)
    finally:
        await raw.aclose()
    assert response.status_code == 401


async def test_a_session_never_gains_scopes_from_a_broaderaccess_token(server, committed):
    membership = committed(MembershipFactory, role="admin")
    application = committed(ApplicationFactory)
    common = {"membership": membership, "application": application, "resource": [server.mcp_url]}
    narrow = committed(AccessTokenFactory, scope="mcp:read", **common)
    broad = committed(AccessTokenFactory, scope="mcp:read mcp:write", **common)
    raw = RawMcp(narrow.token)
    try:
        session_id = await raw.initialize(server.mcp_url)
        raw.token = broad.token
        listed = await raw.result(server.mcp_url, "tools/list", session_id=session_id)
    finally:
        await raw.aclose()
    assert [tool["name"] for tool in listed["tools"]] == ["whoami"]

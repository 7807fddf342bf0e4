"""A toolset a tenant has not enabled is invisible and unreachable for that tenant only."""

from __future__ import annotations

import pytest

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import access_token
from tests.e2e.raw_mcp import RawMcp, sse_messages

pytestmark = pytest.mark.django_db


async def _session(server, person: Person) -> tuple[RawMcp, str]:
    raw = RawMcp(await access_token(server, person))
    return raw, await raw.initialize(server.mcp_url)


async def test_a_disabled_toolset_is_hidden_and_refused_for_that_tenant(faults_server, tenant_toolset):
    tenant_toolset("acme", "faults", enabled=False)
    alice, alice_session = await _session(faults_server, Person("alice"))
    carol, carol_session = await _session(faults_server, Person("carol"))
    try:
        alice_tools = await alice.result(faults_server.mcp_url, "tools/list", session_id=alice_session)
        refused = await alice.request(
            faults_server.mcp_url, "tools/call", {"name": "fail_not_found"}, session_id=alice_session
        )
        carol_tools = await carol.result(faults_server.mcp_url, "tools/list", session_id=carol_session)
    finally:
        await alice.aclose()
        await carol.aclose()
    assert {t["name"] for t in alice_tools["tools"]} == {"whoami", "set_display_name"}
    (error,) = [m["error"] for m in sse_messages(refused) if "error" in m]
    assert error["code"] == -32602
    assert "Unknown tool" in error["message"]
    assert "fail_not_found" in {t["name"] for t in carol_tools["tools"]}


async def test_log_messages_honour_the_session_s_level(server, tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)
    raw, session_id = await _session(server, Person("alice"))
    try:
        counts = {}
        for level in ("warning", "debug"):
            await raw.result(server.mcp_url, "logging/setLevel", {"level": level}, session_id=session_id)
            response = await raw.request(
                server.mcp_url, "tools/call", {"name": "test_tool_with_logging"}, session_id=session_id
            )
            counts[level] = sum(m.get("method") == "notifications/message" for m in sse_messages(response))
    finally:
        await raw.aclose()
    assert counts == {"warning": 0, "debug": 3}

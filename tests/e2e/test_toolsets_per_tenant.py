"""A toolset a tenant has not enabled is invisible and unreachable for that tenant only."""

from __future__ import annotations

import pytest

from accounts.models import Tenant
from mcp_gateway.models import TenantToolset
from tests.e2e.conftest import _in_own_thread
from tests.e2e.harness import OAuthDriver, Person, RawMcp, sse_messages

pytestmark = pytest.mark.django_db


async def _session(server, person: Person) -> tuple[RawMcp, str]:
    driver = OAuthDriver(server)
    try:
        raw = RawMcp((await driver.token_for(person))["access_token"])
    finally:
        await driver.aclose()
    return raw, await raw.initialize(server.mcp_url)


def _set_faults_for_acme(enabled: bool | None) -> None:
    # Written as the admin inline would: this test process does not serve the faults toolset.
    acme = Tenant.objects.get(slug="acme")
    if enabled is None:
        TenantToolset.objects.filter(tenant=acme, toolset="faults").delete()
    else:
        TenantToolset.objects.update_or_create(tenant=acme, toolset="faults", defaults={"enabled": enabled})


@pytest.fixture
def faults_off_for_acme(django_db_blocker):
    with django_db_blocker.unblock():
        _in_own_thread(lambda: _set_faults_for_acme(False))
    yield
    with django_db_blocker.unblock():
        _in_own_thread(lambda: _set_faults_for_acme(None))


async def test_a_disabled_toolset_is_hidden_and_refused_for_that_tenant(faults_server, faults_off_for_acme):
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

"""The official MCP conformance suite's active server scenarios, against Gatehouse with auth on."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from accounts.models import Tenant
from mcp_gateway.models import TenantToolset
from tests.e2e.conftest import MAIN_SERVER_TOOLSET_CACHE_SECONDS, _in_own_thread
from tests.e2e.harness import BASE_DIR, OAuthDriver, Person

pytestmark = pytest.mark.django_db

RUNNER = BASE_DIR.parent / "shared" / "tools" / "mcp-conformance"
BASELINE = Path(__file__).resolve().parents[1] / "conformance" / "baseline.yml"


def _conformance_for_acme(enabled: bool) -> None:
    acme = Tenant.objects.get(slug="acme")
    if enabled:
        TenantToolset.objects.update_or_create(tenant=acme, toolset="conformance", defaults={"enabled": True})
    else:
        TenantToolset.objects.filter(tenant=acme, toolset="conformance").delete()


@pytest.fixture
def conformance_enabled(django_db_blocker):
    with django_db_blocker.unblock():
        _in_own_thread(lambda: _conformance_for_acme(True))
    yield
    with django_db_blocker.unblock():
        _in_own_thread(lambda: _conformance_for_acme(False))


async def test_the_active_server_scenarios_pass(server, conformance_enabled):
    assert RUNNER.exists(), (
        f"the conformance runner is expected at {RUNNER} (../shared/tools beside the checkout)"
    )
    driver = OAuthDriver(server)
    try:
        token = (await driver.token_for(Person("alice")))["access_token"]
    finally:
        await driver.aclose()
    await asyncio.sleep(MAIN_SERVER_TOOLSET_CACHE_SECONDS + 0.5)  # let the server see the enabled toolset
    completed = await asyncio.to_thread(
        subprocess.run,
        ["bash", str(RUNNER), server.mcp_url, token, "--", "--expected-failures", str(BASELINE)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    summary = completed.stdout[completed.stdout.find("=== SUMMARY ===") :]
    assert completed.returncode == 0, f"{summary or completed.stdout[-4000:]}\n{completed.stderr[-4000:]}"
    assert "Total:" in summary

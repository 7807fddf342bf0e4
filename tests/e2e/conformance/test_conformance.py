"""The official MCP conformance suite's active server scenarios, against Gatehouse with auth on."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from tests.e2e.harness import BASE_DIR, Person
from tests.e2e.oauth_driver import access_token

pytestmark = pytest.mark.django_db

RUNNER = BASE_DIR.parent / "shared" / "tools" / "mcp-conformance"
BASELINE = Path(__file__).resolve().parents[2] / "conformance" / "baseline.yml"


async def test_the_active_server_scenarios_pass(server, tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)
    assert RUNNER.exists(), (
        f"the conformance runner is expected at {RUNNER} (../shared/tools beside the checkout)"
    )
    token = await access_token(server, Person("alice"))
    completed = await asyncio.to_thread(
        subprocess.run,
        ["bash", str(RUNNER), server.mcp_url, token, "--", "--expected-failures", str(BASELINE)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    summary = completed.stdout[completed.stdout.find("=== SUMMARY ===") :]
    print(summary)  # shown with -s, and in the CI log when the test fails
    assert completed.returncode == 0, f"{summary or completed.stdout[-4000:]}\n{completed.stderr[-4000:]}"
    assert "Total:" in summary

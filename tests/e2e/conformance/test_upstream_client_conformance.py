"""The official conformance suite's client scenarios, against Gatehouse's upstream client.

``conformance client --scenario S --command "python manage.py upstream_conformance_client"``
(``@modelcontextprotocol/conformance`` 0.2.0-alpha.12) starts the scenario's MCP server and runs
the command with its URL; the command registers a temporary upstream of the ``conformance``
tenant for it, lists, calls and reads through the federation's pooled sessions, and removes it
(``upstreams.conformance_client``), on the test database. So that each scenario does not start
Django anew, the suite's command here is ``client_relay.py``, which hands the scenario to one
Django process started for the test (``client_zygote.py``); it runs the same management command,
in a child forked per scenario. The first scenario runs alone (it
creates the tenant and its member), the others a few at a time: each run lists and calls only its
own upstream. The expected-failure list
``tests/conformance/client-baseline.yml`` says which are not passing yet; the suite exits non-zero
on an unexpected failure and on a stale entry alike. Every authorization scenario (``auth/*``) of
the protocol is run, the upstream signing in by authorization code (``upstreams.sign_in``), plus
the extension's client-credentials-basic. Not run: the extension's others (a signed JWT,
enterprise-managed authorization, DPoP, workload identity) and the ``sep-2640-*`` skills ones
(docs/conformance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import BASE_DIR
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db

BASELINE = Path(__file__).resolve().parents[2] / "conformance" / "client-baseline.yml"
SUITE_HOME = Path(os.environ.get("MCP_TOOLS_02_HOME", Path.home() / ".cache" / "mcp-tools-0.2"))
AUTH_CODE_SCENARIOS = (
    "metadata-default",
    "metadata-var1",
    "metadata-var2",
    "metadata-var3",
    "basic-cimd",
    "scope-from-www-authenticate",
    "scope-from-scopes-supported",
    "scope-omitted-when-undefined",
    "scope-step-up",
    "scope-retry-limit",
    "token-endpoint-auth-basic",
    "token-endpoint-auth-post",
    "token-endpoint-auth-none",
    "pre-registration",
    "2025-03-26-oauth-metadata-backcompat",
    "2025-03-26-oauth-endpoint-fallback",
    "resource-mismatch",
    "offline-access-scope",
    "offline-access-not-supported",
    "authorization-server-migration",
    "iss-supported",
    "iss-not-advertised",
    "iss-supported-missing",
    "iss-wrong-issuer",
    "iss-unexpected",
    "iss-normalized",
    "metadata-issuer-mismatch",
)
SCENARIOS = (
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    # Authorization: an upstream that signs in with OAuth (authorization code), its sign-in made by
    # the conformance client's headless browser (the scenarios' authorization servers approve at
    # once); and OAuth client credentials (the extension's client-credentials-basic).
    *(f"auth/{name}" for name in AUTH_CODE_SCENARIOS),
    "auth/client-credentials-basic",
)
# The suite's per-scenario limit for the client (ms), and the test's for each whole run (s).
CLIENT_TIMEOUT_MS = 60000
RUN_TIMEOUT_SECONDS = 120
# Runs at once after the first.
AT_ONCE = 4
ZYGOTE_START_SECONDS = 60
RELAY = Path(__file__).resolve().with_name("client_relay.py")


def _conformance_client(env: dict[str, str], scenario: str, output: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = SUITE_HOME / "node_modules" / ".bin"
    return subprocess.run(
        [
            str(bin_dir / "node"),
            str(bin_dir / "conformance"),
            "client",
            "--command",
            f"{sys.executable} {RELAY}",
            "--scenario",
            scenario,
            "--expected-failures",
            str(BASELINE),
            "--timeout",
            str(CLIENT_TIMEOUT_MS),
            "-o",
            str(output),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
        cwd=BASE_DIR,
    )


@contextlib.contextmanager
def _zygote(server, directory: Path) -> Iterator[dict[str, str]]:
    """The process that runs the management command for each scenario (``client_zygote``), on the
    session's server settings and test database (the scenario servers are on loopback), and the
    environment the relay finds it by."""
    socket_path = directory / "zygote.sock"
    env = {**server.env, "NO_COLOR": "1", "UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.conformance.client_zygote", str(socket_path)], env=env, cwd=BASE_DIR
    )

    def listening() -> bool:
        assert process.poll() is None, "the conformance zygote exited before it listened"
        return socket_path.exists()

    try:
        wait_until(listening, within=ZYGOTE_START_SECONDS, what="the conformance zygote listening")
        yield {**env, "GATEHOUSE_CONFORMANCE_ZYGOTE": str(socket_path)}
    finally:
        process.kill()
        process.wait()


# 39 scenarios, four at a time: about 80 s on a quiet machine, well past the default limit on a busy one.
@pytest.mark.timeout(900)
async def test_the_client_scenarios_pass_against_the_upstream_client(server, tmp_path):
    output = Path(os.environ.get("GATEHOUSE_ARTIFACTS_DIR") or tmp_path) / "conformance-client"
    slots = asyncio.Semaphore(AT_ONCE)
    # A short directory: a Unix socket's path is limited to about a hundred bytes.
    with tempfile.TemporaryDirectory(prefix="gh-conf-") as short, _zygote(server, Path(short)) as env:

        async def run(scenario: str) -> subprocess.CompletedProcess[str]:
            async with slots:
                return await asyncio.to_thread(_conformance_client, env, scenario, output)

        first = await run(SCENARIOS[0])
        rest = await asyncio.gather(*(run(scenario) for scenario in SCENARIOS[1:]))
    completed = dict(zip(SCENARIOS, [first, *rest], strict=True))
    logs = {
        scenario: f"### {scenario} (exit {done.returncode})\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        for scenario, done in completed.items()
    }
    print("\n".join(logs.values()))  # shown with -s, and in the CI log when the test fails
    exit_codes = {scenario: done.returncode for scenario, done in completed.items()}
    assert exit_codes == dict.fromkeys(SCENARIOS, 0), "\n".join(
        logs[scenario] for scenario, code in exit_codes.items() if code != 0
    )

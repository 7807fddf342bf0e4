"""``GET /metrics`` on a real Daphne process: what a Prometheus scraper sees, and who may see it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from core.metrics import METRICS_FORBIDDEN
from tests.e2e.harness import DaphneServer, Person, sdk_client
from tests.e2e.oauth_driver import minted_sdk_client

pytestmark = pytest.mark.django_db

TOKEN = "e2e-metrics-token"


def _start(database_url: str, log_path: Path, **env: str) -> DaphneServer:
    server = DaphneServer(database_url=database_url, log_path=log_path, extra_env=env)
    server.start()
    return server


@pytest.fixture(scope="module")
def guarded_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """Metrics open only to a network the tests are not in, or to the token."""
    server = _start(
        database_url,
        tmp_path_factory.mktemp("daphne") / "guarded.log",
        METRICS_ALLOWED_NETWORKS="10.0.0.0/8",
        METRICS_TOKEN=TOKEN,
    )
    try:
        yield server
    finally:
        server.stop()


async def _scrape(server: DaphneServer) -> dict[tuple[str, frozenset], float]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"{server.base_url}/metrics")
    assert response.status_code == 200, response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _value(samples: dict[tuple[str, frozenset], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_a_whoami_call_shows_in_the_tool_call_counter_and_latency_histogram(server):
    labels = {"tool": "whoami", "tenant": "acme"}
    before = await _scrape(server)

    async with sdk_client(server, Person("alice")) as (client, _):
        await client.call_tool("whoami", {})
        during = await _scrape(server)

    after = await _scrape(server)
    assert _value(after, "gatehouse_tool_calls_total", **labels, outcome="ok") == (
        _value(before, "gatehouse_tool_calls_total", **labels, outcome="ok") + 1
    )
    assert _value(after, "gatehouse_tool_call_duration_seconds_count", **labels) == (
        _value(before, "gatehouse_tool_call_duration_seconds_count", **labels) + 1
    )
    # Earlier tests left these counters above zero: what this test did is the difference.
    sessions, consents = "gatehouse_mcp_sessions_active", "gatehouse_oauth_events_total"
    assert _value(during, sessions, tenant="acme") == _value(before, sessions, tenant="acme") + 1
    assert _value(after, consents, event="consent.granted", outcome="ok") == (
        _value(before, consents, event="consent.granted", outcome="ok") + 1
    )


async def test_a_refused_tool_call_shows_as_denied(server, committed):
    labels = {"tool": "set_display_name", "tenant": "acme", "outcome": "denied"}
    before = await _scrape(server)

    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        with pytest.raises(MCPError):
            await client.call_tool("set_display_name", {"display_name": "Bobby"})

    after = await _scrape(server)
    assert _value(after, "gatehouse_tool_calls_total", **labels) == (
        _value(before, "gatehouse_tool_calls_total", **labels) + 1
    )


def test_a_scrape_from_outside_the_allowed_networks_is_refused(guarded_server):
    response = httpx.get(f"{guarded_server.base_url}/metrics", timeout=10)
    assert response.status_code == 403
    assert response.text == METRICS_FORBIDDEN
    assert response.headers["x-request-id"]


def test_a_scrape_with_the_metrics_token_is_allowed_from_anywhere(guarded_server):
    response = httpx.get(
        f"{guarded_server.base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert response.status_code == 200
    assert "gatehouse_tool_calls_total" in response.text


def test_a_scrape_with_a_wrong_token_is_refused(guarded_server):
    response = httpx.get(
        f"{guarded_server.base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}-nope"}, timeout=10
    )
    assert response.status_code == 403
    assert response.text == METRICS_FORBIDDEN


def test_a_server_with_a_malformed_metrics_network_refuses_to_start(demo, database_url, tmp_path):
    server = DaphneServer(
        database_url=database_url,
        log_path=tmp_path / "bad.log",
        extra_env={"METRICS_ALLOWED_NETWORKS": "10.0.0.1/8"},
    )
    with pytest.raises(RuntimeError, match="Daphne exited early"):
        server.start()
    server.stop()
    assert "METRICS_ALLOWED_NETWORKS: '10.0.0.1/8' is not a network" in server.log()

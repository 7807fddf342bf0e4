"""Prometheus metrics: who may scrape them, and what the audit trail and the database feed into them."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from core.audit.entry import AuditEntry
from core.metrics import METRICS_FORBIDDEN, metrics_access_allowed, metrics_observe, metrics_registry
from core.models import AuditAction, AuditOutcome
from mcp_gateway.models import McpSession
from tests.support.factories import ApplicationFactory, MembershipFactory, TenantFactory

pytestmark = pytest.mark.django_db

OUTSIDER_IP = "203.0.113.9"
TOKEN = "metrics-token-for-tests"


@pytest.fixture
def metrics_settings(settings):
    """Change metrics settings for one test."""

    def change(**values) -> None:
        settings.GATEHOUSE = {**settings.GATEHOUSE, **values}

    return change


def _sample(name: str, labels: dict[str, str], registry: CollectorRegistry = REGISTRY) -> float:
    return registry.get_sample_value(name, labels) or 0.0


# Who may scrape


def test_a_scrape_from_loopback_sees_the_metrics(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE gatehouse_tool_calls_total counter" in response.content.decode()
    assert "no-cache" in response["Cache-Control"]


def test_a_scrape_from_loopback_over_ipv6_or_mapped_ipv4_is_allowed(client):
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200


def test_a_scrape_from_another_network_is_refused_without_saying_why(client):
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDER_IP)
    assert response.status_code == 403
    assert response.content.decode() == METRICS_FORBIDDEN
    assert "gatehouse" not in response.content.decode()


def test_a_scrape_from_an_allowed_network_is_allowed(client, metrics_settings):
    metrics_settings(METRICS_ALLOWED_NETWORKS=["203.0.113.0/24"])
    assert client.get("/metrics", REMOTE_ADDR=OUTSIDER_IP).status_code == 200
    assert client.get("/metrics").status_code == 403


def test_a_forwarded_loopback_address_is_not_believed_without_trusted_proxies(client, metrics_settings):
    metrics_settings(TRUSTED_PROXY_COUNT=0)
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDER_IP, HTTP_X_FORWARDED_FOR="127.0.0.1")
    assert response.status_code == 403


def test_a_request_through_an_undeclared_proxy_on_loopback_is_refused(client, metrics_settings):
    # nginx on the same host, TRUSTED_PROXY_COUNT left at 0: the peer is loopback for everyone.
    metrics_settings(TRUSTED_PROXY_COUNT=0, METRICS_TOKEN=TOKEN)
    refused = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=OUTSIDER_IP)
    with_token = client.get(
        "/metrics",
        REMOTE_ADDR="127.0.0.1",
        HTTP_X_FORWARDED_FOR=OUTSIDER_IP,
        HTTP_AUTHORIZATION=f"Bearer {TOKEN}",
    )
    assert refused.status_code == 403
    assert with_token.status_code == 200


def test_behind_a_trusted_proxy_the_forwarded_client_address_decides(client, metrics_settings):
    metrics_settings(TRUSTED_PROXY_COUNT=1)
    refused = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=OUTSIDER_IP)
    allowed = client.get("/metrics", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="127.0.0.1")
    assert refused.status_code == 403
    assert allowed.status_code == 200


def test_the_metrics_token_opens_the_metrics_from_anywhere(client, metrics_settings):
    metrics_settings(METRICS_TOKEN=TOKEN)
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDER_IP, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer ", "Bearer ünïcode"],
    ids=["longer", "shorter", "basic-scheme", "no-scheme", "empty", "non-ascii"],
)
def test_a_wrong_metrics_token_is_refused(client, metrics_settings, authorization):
    metrics_settings(METRICS_TOKEN=TOKEN)
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDER_IP, HTTP_AUTHORIZATION=authorization)
    assert response.status_code == 403
    assert response.content.decode() == METRICS_FORBIDDEN


def test_without_a_configured_token_no_bearer_opens_the_metrics(client, metrics_settings):
    metrics_settings(METRICS_TOKEN=None)
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDER_IP, HTTP_AUTHORIZATION="Bearer None")
    assert response.status_code == 403


def test_the_metrics_only_answer_get(client):
    assert client.post("/metrics").status_code == 405


@pytest.mark.parametrize(
    "networks",
    [["10.0.0.1/8"], ["not-a-network"], ["127.0.0.1/33"], "127.0.0.1/32"],
    ids=["host-bits-set", "garbage", "bad-prefix", "not-a-list"],
)
def test_bad_allowed_networks_are_refused_loudly(client, metrics_settings, networks):
    metrics_settings(METRICS_ALLOWED_NETWORKS=networks)
    with pytest.raises(ImproperlyConfigured, match="METRICS_ALLOWED_NETWORKS"):
        metrics_access_allowed(ip="127.0.0.1", authorization=None)


def test_the_scrape_offers_openmetrics_to_a_scraper_that_asks(client):
    response = client.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().endswith("# EOF\n")


# What the audit trail feeds in


def _entry(action: AuditAction, **fields) -> AuditEntry:
    return AuditEntry(action=action, **{"tenant_slug": "acme-metrics", **fields})


def test_a_tool_call_counts_by_tool_tenant_and_outcome_and_feeds_the_latency_histogram():
    labels = {"tool": "whoami", "tenant": "acme-metrics", "outcome": "ok"}
    before = _sample("gatehouse_tool_calls_total", labels)
    latency = {"tool": "whoami", "tenant": "acme-metrics"}
    observed_before = _sample("gatehouse_tool_call_duration_seconds_count", latency)
    fast_before = _sample("gatehouse_tool_call_duration_seconds_bucket", {**latency, "le": "0.025"})

    metrics_observe(_entry(AuditAction.TOOL_CALLED, target="whoami", duration_ms=20.0))

    assert _sample("gatehouse_tool_calls_total", labels) == before + 1
    assert _sample("gatehouse_tool_call_duration_seconds_count", latency) == observed_before + 1
    assert (
        _sample("gatehouse_tool_call_duration_seconds_bucket", {**latency, "le": "0.025"}) == fast_before + 1
    )


def test_a_failed_tool_call_counts_as_an_error():
    labels = {"tool": "whoami", "tenant": "acme-metrics", "outcome": "error"}
    before = _sample("gatehouse_tool_calls_total", labels)
    metrics_observe(
        _entry(AuditAction.TOOL_CALLED, outcome=AuditOutcome.ERROR, target="whoami", duration_ms=3.0)
    )
    assert _sample("gatehouse_tool_calls_total", labels) == before + 1


def test_refused_tool_calls_count_as_denied_or_rate_limited():
    denied = {"tool": "set_display_name", "tenant": "acme-metrics", "outcome": "denied"}
    limited = {"tool": "set_display_name", "tenant": "acme-metrics", "outcome": "rate_limited"}
    before = (_sample("gatehouse_tool_calls_total", denied), _sample("gatehouse_tool_calls_total", limited))
    refusals_before = _sample("gatehouse_rate_limit_refusals_total", {"scope": "tool"})

    metrics_observe(
        _entry(
            AuditAction.PERMISSION_DENIED,
            outcome=AuditOutcome.DENIED,
            target="set_display_name",
            detail={"method": "tools/call"},
        )
    )
    metrics_observe(
        _entry(
            AuditAction.RATE_LIMITED,
            outcome=AuditOutcome.DENIED,
            target="set_display_name",
            detail={"method": "tools/call", "scope": "tool"},
        )
    )

    assert _sample("gatehouse_tool_calls_total", denied) == before[0] + 1
    assert _sample("gatehouse_tool_calls_total", limited) == before[1] + 1
    assert _sample("gatehouse_rate_limit_refusals_total", {"scope": "tool"}) == refusals_before + 1


def test_a_made_up_tool_name_is_counted_as_unknown_so_clients_cannot_mint_series():
    labels = {"tool": "unknown", "tenant": "acme-metrics", "outcome": "error"}
    before = _sample("gatehouse_tool_calls_total", labels)
    metrics_observe(_entry(AuditAction.TOOL_CALLED, outcome=AuditOutcome.ERROR, target="no-such-tool-123"))
    assert _sample("gatehouse_tool_calls_total", labels) == before + 1
    assert "no-such-tool-123" not in generate_latest(REGISTRY).decode()


def test_a_rate_limit_refusal_of_a_login_counts_by_scope_only():
    before = _sample("gatehouse_rate_limit_refusals_total", {"scope": "login"})
    metrics_observe(AuditEntry(action=AuditAction.RATE_LIMITED, detail={"scope": "login"}))
    assert _sample("gatehouse_rate_limit_refusals_total", {"scope": "login"}) == before + 1


def test_resource_reads_count_by_tenant_and_outcome_including_refusals():
    ok = {"tenant": "acme-metrics", "outcome": "ok"}
    denied = {"tenant": "acme-metrics", "outcome": "denied"}
    before = (
        _sample("gatehouse_resource_reads_total", ok),
        _sample("gatehouse_resource_reads_total", denied),
    )
    metrics_observe(_entry(AuditAction.RESOURCE_READ, target="gatehouse://me"))
    metrics_observe(
        _entry(
            AuditAction.PERMISSION_DENIED, outcome=AuditOutcome.DENIED, detail={"method": "resources/read"}
        )
    )
    assert _sample("gatehouse_resource_reads_total", ok) == before[0] + 1
    assert _sample("gatehouse_resource_reads_total", denied) == before[1] + 1


@pytest.mark.parametrize(
    ("action", "outcome"),
    [
        (AuditAction.LOGIN_FAILED, AuditOutcome.DENIED),
        (AuditAction.CONSENT_GRANTED, AuditOutcome.OK),
        (AuditAction.TOKEN_REFRESHED, AuditOutcome.OK),
        (AuditAction.CLIENT_REGISTERED, AuditOutcome.OK),
    ],
)
def test_oauth_events_count_by_event_and_outcome(action, outcome):
    labels = {"event": action.value, "outcome": outcome.value}
    before = _sample("gatehouse_oauth_events_total", labels)
    metrics_observe(AuditEntry(action=action, outcome=outcome))
    assert _sample("gatehouse_oauth_events_total", labels) == before + 1


def test_session_events_count_created_and_terminated():
    before = (
        _sample("gatehouse_sessions_events_total", {"event": "created"}),
        _sample("gatehouse_sessions_events_total", {"event": "terminated"}),
    )
    metrics_observe(AuditEntry(action=AuditAction.SESSION_CREATED))
    metrics_observe(AuditEntry(action=AuditAction.SESSION_TERMINATED))
    assert _sample("gatehouse_sessions_events_total", {"event": "created"}) == before[0] + 1
    assert _sample("gatehouse_sessions_events_total", {"event": "terminated"}) == before[1] + 1


def test_counting_a_malformed_event_never_raises(caplog):
    metrics_observe(AuditEntry(action=AuditAction.RATE_LIMITED, detail=None))  # type: ignore[arg-type]
    assert "Metrics could not count an audit event" in caplog.text


# What the database feeds in


def _session(key: str, *, tenant, idle: timedelta, ended: bool = False) -> McpSession:
    membership = MembershipFactory.create(tenant=tenant)
    now = timezone.now()
    return McpSession.objects.create(
        id=f"metrics-test-{key}",
        user=membership.user,
        tenant=tenant,
        application=ApplicationFactory.create(),
        scopes="mcp:read",
        protocol_version="2025-11-25",
        last_seen=now - idle,
        terminated_at=now if ended else None,
    )


def test_active_sessions_are_counted_per_tenant_from_the_database(client, metrics_settings):
    metrics_settings(MCP_SESSION_IDLE_SECONDS=3600)
    busy = TenantFactory.create(slug="busy-metrics")
    quiet = TenantFactory.create(slug="quiet-metrics")
    _session("live-1", tenant=busy, idle=timedelta(minutes=1))
    _session("live-2", tenant=busy, idle=timedelta(minutes=59))
    _session("idle", tenant=busy, idle=timedelta(hours=2))
    _session("ended", tenant=busy, idle=timedelta(minutes=1), ended=True)

    families = {
        family.name: family
        for family in text_string_to_metric_families(client.get("/metrics").content.decode())
    }

    active = {s.labels["tenant"]: s.value for s in families["gatehouse_mcp_sessions_active"].samples}
    assert active["busy-metrics"] == 2
    assert active[quiet.slug] == 0


def test_several_worker_processes_are_summed_in_multiprocess_mode(tmp_path, monkeypatch):
    """Two processes count a tool call each into a shared directory; one scrape shows both."""
    script = (
        "import django; django.setup()\n"
        "from core.audit.entry import AuditEntry\n"
        "from core.metrics import metrics_observe\n"
        "metrics_observe(AuditEntry(action='tool.called', target='whoami', tenant_slug='multi',"
        " duration_ms=5.0))\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "SECRET_KEY": "x",
    }
    for _ in range(2):
        subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=Path(__file__).parents[2])

    tenant = TenantFactory.create(slug="multi")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    registry = metrics_registry()

    labels = {"tool": "whoami", "tenant": "multi", "outcome": "ok"}
    assert registry.get_sample_value("gatehouse_tool_calls_total", labels) == 2
    latency = {"tool": "whoami", "tenant": "multi"}
    assert registry.get_sample_value("gatehouse_tool_call_duration_seconds_count", latency) == 2
    # The database-backed gauge is part of the multiprocess scrape as well.
    assert registry.get_sample_value("gatehouse_mcp_sessions_active", {"tenant": tenant.slug}) == 0

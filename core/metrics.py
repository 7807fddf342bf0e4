"""Prometheus metrics at ``/metrics``, fed by the audit trail (``metrics_observe``) and the database.

Counters and histograms (``prometheus_client``):

* ``gatehouse_tool_calls_total{tool,tenant,outcome}``: every ``tools/call``, with outcome ``ok``,
  ``error``, ``denied`` (missing scope) or ``rate_limited``; and the latency histogram
  ``gatehouse_tool_call_duration_seconds{tool,tenant}`` of the calls that ran;
* ``gatehouse_resource_reads_total{tenant,outcome}``, the same for ``resources/read``;
* ``gatehouse_oauth_events_total{event,outcome}``: logins, consents, client registrations, tokens;
* ``gatehouse_rate_limit_refusals_total{scope}``;
* ``gatehouse_rate_limit_fallbacks_total``: outages of the shared rate-limit storage this process
  lived through, and ``gatehouse_rate_limit_fallback_active``, 1 per process counting on its own now
  (core.ratelimit.fallback);
* ``gatehouse_sessions_events_total{event}``: MCP sessions created and terminated.

Apps add their own: counters they define at import (``language_models.metrics``), and collectors
read at scrape time, registered with ``metrics_collector_register`` (``mcp_gateway.kernel.metrics``:
active sessions per tenant). The MCP endpoint names the tools that may become label values
(``metrics_tool_names_set``), so this module knows no app.

Several worker processes: by default each process keeps its own counters, and a scrape through a
load balancer sees whichever process answered. Set ``PROMETHEUS_MULTIPROC_DIR`` to an empty
directory shared by the workers (and emptied at each deployment) and the counters are kept in
files there and summed at every scrape (prometheus_client's multiprocess mode); the per-process
``process_*`` and ``python_*`` metrics are then left out. Without it, scrape each process directly.

Access: clients in ``METRICS_ALLOWED_NETWORKS`` (loopback by default), or anyone presenting
``Authorization: Bearer <METRICS_TOKEN>``; everyone else gets a bare 403.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import logging
import os
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from core.audit.entry import AuditEntry
from core.conf import gatehouse_settings
from core.models import AuditAction, RateLimitScope
from core.request_context import client_ip, request_context

logger = logging.getLogger(__name__)

METRICS_FORBIDDEN = "Forbidden.\n"
UNKNOWN = "unknown"
NO_TENANT = "none"

TOOL_CALLS = Counter(
    "gatehouse_tool_calls", "MCP tool calls, including refused ones.", ["tool", "tenant", "outcome"]
)
TOOL_CALL_DURATION = Histogram(
    "gatehouse_tool_call_duration_seconds",
    "Time spent answering MCP tool calls that ran.",
    ["tool", "tenant"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
RESOURCE_READS = Counter(
    "gatehouse_resource_reads", "MCP resource reads, including refused ones.", ["tenant", "outcome"]
)
OAUTH_EVENTS = Counter(
    "gatehouse_oauth_events", "Logins, consents, client registrations and tokens.", ["event", "outcome"]
)
RATE_LIMIT_REFUSALS = Counter("gatehouse_rate_limit_refusals", "Requests refused by a rate limit.", ["scope"])
RATE_LIMIT_FALLBACKS = Counter(
    "gatehouse_rate_limit_fallbacks",
    "Times the shared rate-limit storage stopped answering and this process began counting alone.",
)
# Summed over the live processes in multiprocess mode: how many count alone right now.
RATE_LIMIT_FALLBACK_ACTIVE = Gauge(
    "gatehouse_rate_limit_fallback_active",
    "1 while this process counts rate limits alone because the shared storage does not answer.",
    multiprocess_mode="livesum",
)
SESSION_EVENTS = Counter("gatehouse_sessions_events", "MCP sessions created and terminated.", ["event"])
_OAUTH_ACTIONS = frozenset(
    action.value
    for action in (
        AuditAction.LOGIN_SUCCEEDED,
        AuditAction.LOGIN_FAILED,
        AuditAction.CONSENT_GRANTED,
        AuditAction.CONSENT_DENIED,
        AuditAction.CLIENT_REGISTERED,
        AuditAction.TOKEN_ISSUED,
        AuditAction.TOKEN_REFRESHED,
        AuditAction.TOKEN_REVOKED,
    )
)
_SESSION_EVENTS = {
    AuditAction.SESSION_CREATED.value: "created",
    AuditAction.SESSION_TERMINATED.value: "terminated",
}
_REFUSALS = {AuditAction.PERMISSION_DENIED.value: "denied", AuditAction.RATE_LIMITED.value: "rate_limited"}
_RATE_LIMIT_SCOPES = frozenset(RateLimitScope.values)


def metrics_observe(entry: AuditEntry) -> None:
    """Count one audit event (tool calls also feed the latency histogram). Never raises."""
    try:
        _observe(entry)
    except Exception:
        # A metric is never worth a failed request; the audit row is still written.
        logger.exception("Metrics could not count an audit event (%s).", entry.action)


def _observe(entry: AuditEntry) -> None:
    action = str(entry.action)
    outcome = str(entry.outcome)
    tenant = entry.tenant_slug or NO_TENANT
    if action == AuditAction.RATE_LIMITED:
        scope = entry.detail.get("scope")
        RATE_LIMIT_REFUSALS.labels(scope if scope in _RATE_LIMIT_SCOPES else UNKNOWN).inc()
    if action == AuditAction.TOOL_CALLED:
        tool = _tool_label(entry.target)
        TOOL_CALLS.labels(tool, tenant, outcome).inc()
        if entry.duration_ms is not None:
            TOOL_CALL_DURATION.labels(tool, tenant).observe(entry.duration_ms / 1000)
    elif action == AuditAction.RESOURCE_READ:
        RESOURCE_READS.labels(tenant, outcome).inc()
    elif action in _REFUSALS:
        method = entry.detail.get("method")
        if method == "tools/call":
            TOOL_CALLS.labels(_tool_label(entry.target), tenant, _REFUSALS[action]).inc()
        elif method == "resources/read":
            RESOURCE_READS.labels(tenant, _REFUSALS[action]).inc()
    elif action in _OAUTH_ACTIONS:
        OAUTH_EVENTS.labels(action, outcome).inc()
    elif action in _SESSION_EVENTS:
        SESSION_EVENTS.labels(_SESSION_EVENTS[action]).inc()


def _tool_label(name: str) -> str:
    # Only tools this deployment serves become label values: a client calling made-up names must
    # not be able to create a time series per name.
    return name if _known_tool(name) else UNKNOWN


def _no_tools(name: str) -> bool:
    return False


_known_tool: Callable[[str], bool] = _no_tools
# Collectors other apps register (read from their own tables at scrape time).
_collectors: list[Collector] = []


def metrics_tool_names_set(*, is_known: Callable[[str], bool]) -> None:
    """Say which tool names may become label values (the MCP endpoint's registry, at start)."""
    global _known_tool
    _known_tool = is_known


def metrics_collector_register(collector: Collector) -> None:
    """Add a collector an app owns to what every scrape shows, in either mode."""
    _collectors.append(collector)
    if _multiprocess_dir() is None:
        REGISTRY.register(collector)


def _multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def metrics_registry() -> CollectorRegistry:
    """What a scrape shows: this process's registry, or every worker's files in multiprocess mode."""
    if _multiprocess_dir() is None:
        return REGISTRY
    # In multiprocess mode the counters live in files; a fresh registry sums them per scrape.
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    for collector in _collectors:
        registry.register(collector)
    return registry


@functools.lru_cache(maxsize=4)
def metrics_allowed_networks(
    values: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Parse ``METRICS_ALLOWED_NETWORKS`` strictly: a typo must not silently open or close /metrics."""
    networks = []
    for value in values:
        try:
            # strict: "10.0.0.1/8" is refused rather than read as 10.0.0.0/8 behind the operator's back.
            networks.append(ipaddress.ip_network(value, strict=True))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"METRICS_ALLOWED_NETWORKS: {value!r} is not a network ({exc})."
            ) from exc
    return tuple(networks)


def _settings_networks() -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return metrics_allowed_networks(gatehouse_settings.METRICS_ALLOWED_NETWORKS)


# Checked when the process starts (this module is loaded with the URLs and the audit trail), so a
# bad value stops the server instead of surfacing at the first scrape.
_settings_networks()


def metrics_access_allowed(*, ip: str | None, authorization: str | None) -> bool:
    """Whether a scrape may see the metrics: from an allowed network, or with the metrics token."""
    if ip is not None:
        address = ipaddress.ip_address(ip)
        # A dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d; match them as IPv4.
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in network for network in _settings_networks()):
            return True
    expected = gatehouse_settings.METRICS_TOKEN
    if not expected or not authorization:
        return False
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return False
    return hmac.compare_digest(presented.strip().encode(), expected.encode())


def _request_ip(request: HttpRequest) -> str | None:
    """The address the network rule judges, or None when it cannot be trusted.

    A forwarded request while no proxy is declared (``TRUSTED_PROXY_COUNT`` 0) came through a
    proxy nobody told us about, whose own address (often loopback) would pass for the client's, or
    from a client inventing the header for a server run with ``--proxy-headers``. Either way the
    address proves nothing; only the token can open the metrics then.
    """
    if request.headers.get("X-Forwarded-For") and not gatehouse_settings.TRUSTED_PROXY_COUNT:
        return None
    ctx = request_context()
    if ctx is not None:
        return ctx.ip
    # Outside the ASGI middleware (the test client, WSGI): the same rule on Django's view of it.
    return client_ip(
        peer=request.META.get("REMOTE_ADDR"), forwarded_for=request.META.get("HTTP_X_FORWARDED_FOR")
    )


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition (text, or OpenMetrics when the scraper asks for it)."""
    if not metrics_access_allowed(
        ip=_request_ip(request), authorization=request.headers.get("Authorization")
    ):
        return HttpResponse(METRICS_FORBIDDEN, status=403, content_type="text/plain; charset=utf-8")
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(metrics_registry()), content_type=content_type)

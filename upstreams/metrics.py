"""Calls forwarded to upstream MCP servers, per upstream, for ``/metrics``:
``gatehouse_upstream_calls_total{upstream,method,outcome}`` and
``gatehouse_upstream_call_seconds{upstream,method}``, and their ``list_changed`` notifications,
``gatehouse_upstream_notifications_total{upstream,outcome}``. ``upstream`` is ``<tenant>/<name>``, names
operators choose, so the label set stays small."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

UPSTREAM_CALLS = Counter(
    "gatehouse_upstream_calls",
    "Requests forwarded to upstream MCP servers, by outcome (ok, error, unavailable, cancelled).",
    ["upstream", "method", "outcome"],
)
UPSTREAM_NOTIFICATIONS = Counter(
    "gatehouse_upstream_notifications",
    "list_changed notifications from upstream MCP servers: announced (logged as one change) or "
    "coalesced (folded into a change already waiting), or flooded (the one past the bound that ended "
    "the upstream's session; upstreams.list_changes).",
    ["upstream", "outcome"],
)
UPSTREAM_SECONDS = Histogram(
    "gatehouse_upstream_call_seconds",
    "Time from forwarding a request to an upstream MCP server to its answer.",
    ["upstream", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


def metrics_upstream_call(*, upstream: str, method: str, outcome: str, seconds: float) -> None:
    UPSTREAM_CALLS.labels(upstream, method, outcome).inc()
    UPSTREAM_SECONDS.labels(upstream, method).observe(seconds)


def metrics_upstream_notification(*, upstream: str, outcome: str) -> None:
    UPSTREAM_NOTIFICATIONS.labels(upstream, outcome).inc()

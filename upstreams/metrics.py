"""Calls forwarded to upstream MCP servers, per upstream, for ``/metrics``:
``gatehouse_upstream_calls_total{upstream,method,outcome}`` and
``gatehouse_upstream_call_seconds{upstream,method}``. ``upstream`` is ``<tenant>/<name>``, names
operators choose, so the label set stays small."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

UPSTREAM_CALLS = Counter(
    "gatehouse_upstream_calls",
    "Requests forwarded to upstream MCP servers, by outcome (ok, error, unavailable, cancelled).",
    ["upstream", "method", "outcome"],
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

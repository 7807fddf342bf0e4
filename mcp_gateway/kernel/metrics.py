"""The MCP endpoint's own metrics: ``gatehouse_mcp_streams_open`` (standalone GET streams, summed
over the live processes), ``gatehouse_mcp_sessions_active{tenant}``, read from the database
at each scrape (``McpSession`` rows not terminated and seen within ``MCP_SESSION_IDLE_SECONDS``), so it
is right whichever process is asked and however many there are; and the tool names that may become
label values of the product-wide counters (``core.metrics``). Installed once, when the app is ready.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import timedelta

from django.db import DatabaseError
from django.db.models import Count, Q
from django.utils import timezone
from prometheus_client import Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from accounts.models import Tenant
from core.conf import gatehouse_settings
from core.metrics import metrics_collector_register, metrics_tool_names_set
from mcp_gateway.kernel.registry import default_registry

logger = logging.getLogger(__name__)

STREAMS_OPEN = Gauge(
    "gatehouse_mcp_streams_open",
    "Standalone GET /mcp streams open (handshake-era sessions' notifications).",
    multiprocess_mode="livesum",
)


class ActiveSessionsCollector(Collector):
    """``gatehouse_mcp_sessions_active{tenant}``, read from the database at scrape time."""

    NAME = "gatehouse_mcp_sessions_active"
    HELP = "MCP sessions neither terminated nor idle longer than MCP_SESSION_IDLE_SECONDS."

    def describe(self) -> Iterable[Metric]:
        # Declared without a query, so registering the collector never touches the database.
        return [GaugeMetricFamily(self.NAME, self.HELP, labels=["tenant"])]

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(self.NAME, self.HELP, labels=["tenant"])
        try:
            for slug, active in _active_sessions_by_tenant():
                gauge.add_metric([slug], active)
        except DatabaseError:
            logger.warning("Active sessions left out of the metrics: the database did not answer.")
            return []
        return [gauge]


def _active_sessions_by_tenant() -> Iterator[tuple[str, int]]:
    # Every tenant, with 0 where nothing is live, so series do not vanish between scrapes.
    cutoff = timezone.now() - timedelta(seconds=gatehouse_settings.MCP_SESSION_IDLE_SECONDS)
    live = Q(mcp_sessions__terminated_at__isnull=True, mcp_sessions__last_seen__gte=cutoff)
    rows = Tenant.objects.annotate(active=Count("mcp_sessions", filter=live)).values_list("slug", "active")
    yield from rows.order_by("slug").iterator()


_SESSIONS_COLLECTOR = ActiveSessionsCollector()


def metrics_install() -> None:
    metrics_collector_register(_SESSIONS_COLLECTOR)
    metrics_tool_names_set(is_known=lambda name: default_registry().get(name) is not None)

"""Prometheus metrics (placeholder: the observability work fills this in)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

if TYPE_CHECKING:
    from mcp_gateway.audit import AuditEntry


def metrics_observe(entry: AuditEntry) -> None:
    """Count one audit event (tool calls also feed the latency histogram)."""


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition (placeholder)."""
    return HttpResponse(status=404)

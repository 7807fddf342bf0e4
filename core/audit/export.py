"""The audit trail as CSV, a line at a time, for operators' spreadsheets and archives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from core.csv_export import CSV_CHUNK_ROWS, csv_lines, csv_text
from core.models import AuditEvent

AUDIT_CSV_COLUMNS = (
    "created", "action", "outcome", "tenant", "username", "client_id", "session_id", "request_id", "ip",
    "target", "duration_ms", "detail",
)  # fmt: skip


def _row(event: AuditEvent) -> list[Any]:
    # Usernames, client ids, request ids and targets come from outside: csv_text defuses formulas.
    return [
        event.created.isoformat(),
        event.action,
        event.outcome,
        event.tenant.slug if event.tenant else "",
        csv_text(event.username),
        csv_text(event.client_id),
        event.session_id,
        csv_text(event.request_id),
        event.ip or "",
        csv_text(event.target),
        "" if event.duration_ms is None else event.duration_ms,
        json.dumps(event.detail, sort_keys=True, default=str),
    ]


def audit_csv_lines(*, events: QuerySet[AuditEvent]) -> Iterator[str]:
    """The header, then one line per event; rows are read in chunks, never all at once."""
    rows = map(_row, events.select_related("tenant").iterator(chunk_size=CSV_CHUNK_ROWS))
    return csv_lines(header=AUDIT_CSV_COLUMNS, rows=rows)

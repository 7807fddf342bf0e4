"""The audit trail as CSV, a line at a time, for operators' spreadsheets and archives."""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from itertools import islice
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import QuerySet

from core.models import AuditEvent

AUDIT_CSV_COLUMNS = (
    "created", "action", "outcome", "tenant", "username", "client_id", "session_id", "request_id", "ip",
    "target", "duration_ms", "detail",
)  # fmt: skip
_CHUNK_ROWS = 2000
# A cell starting with one of these is a formula to a spreadsheet; usernames, client names and
# targets come from outside, so they are quoted (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class _Echo:
    """csv.writer wants a file; this one hands each line back instead of storing it."""

    def write(self, value: str) -> str:
        return value


def _text(value: str) -> str:
    return f"'{value}" if value.startswith(_FORMULA_START) else value


def _row(event: AuditEvent) -> list[Any]:
    return [
        event.created.isoformat(),
        event.action,
        event.outcome,
        event.tenant.slug if event.tenant else "",
        _text(event.username),
        _text(event.client_id),
        event.session_id,
        _text(event.request_id),
        event.ip or "",
        _text(event.target),
        "" if event.duration_ms is None else event.duration_ms,
        json.dumps(event.detail, sort_keys=True, default=str),
    ]


def audit_csv_lines(*, events: QuerySet[AuditEvent]) -> Iterator[str]:
    """The header, then one line per event; rows are read in chunks, never all at once."""
    writer = csv.writer(_Echo())
    yield writer.writerow(AUDIT_CSV_COLUMNS)
    for event in events.select_related("tenant").iterator(chunk_size=_CHUNK_ROWS):
        yield writer.writerow(_row(event))


async def lines_async(lines: Iterable[str]) -> AsyncIterator[str]:
    """Serve a synchronous line source to an ASGI server a chunk at a time.

    Django's ASGI handler would otherwise read a synchronous stream to the end into memory before
    sending a byte. All chunks are read on the one database thread, so a server-side cursor opened
    by the first chunk is still there for the next.
    """
    iterator = iter(lines)

    def next_chunk() -> list[str]:
        return list(islice(iterator, _CHUNK_ROWS))

    while chunk := await sync_to_async(next_chunk, thread_sensitive=True)():
        yield "".join(chunk)

"""Records as CSV for operators' spreadsheets and archives: streamed a line at a time, formulas defused.

The audit trail (``audit_export``) and the LLM gateway's usage records share this, so both quote
the same formula characters, read the same chunk size and stream the same way under ASGI; each
names its own columns and says which of them hold text from outside. ``CsvExportAdmin`` gives an
admin list its "Export these as CSV" link (the current filters and search) and action.
"""

from __future__ import annotations

import csv
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import URLPattern, path
from django.utils import timezone

CSV_CHUNK_ROWS = 2000
# A cell starting with one of these is a formula to a spreadsheet; names, models and ids that came
# from outside are quoted (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class _Echo:
    """csv.writer wants a file; this one hands each line back instead of storing it."""

    def write(self, value: str) -> str:
        return value


def csv_text(value: str) -> str:
    """``value`` as a cell no spreadsheet reads as a formula: quoted with ``'`` when it would be."""
    return f"'{value}" if value.startswith(_FORMULA_START) else value


def csv_lines(*, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """The header, then one CSV line per row, as the rows are produced."""
    writer = csv.writer(_Echo())
    yield writer.writerow(header)
    for row in rows:
        yield writer.writerow(row)


async def lines_async(lines: Iterable[str]) -> AsyncIterator[str]:
    """Serve a synchronous line source to an ASGI server a chunk at a time.

    Django's ASGI handler would otherwise read a synchronous stream to the end into memory before
    sending a byte. All chunks are read on the one database thread, so a server-side cursor opened
    by the first chunk is still there for the next.
    """
    iterator = iter(lines)

    def next_chunk() -> list[str]:
        return list(islice(iterator, CSV_CHUNK_ROWS))

    while chunk := await sync_to_async(next_chunk, thread_sensitive=True)():
        yield "".join(chunk)


def csv_response(
    *, request: HttpRequest, lines: Iterable[str], filename_prefix: str
) -> StreamingHttpResponse:
    """A download named ``<prefix>-<UTC time>.csv``, streamed under ASGI and WSGI alike."""
    response = StreamingHttpResponse(
        lines_async(lines) if isinstance(request, ASGIRequest) else lines,
        content_type="text/csv; charset=utf-8",
    )
    filename = f"{filename_prefix}-{timezone.now():%Y%m%d-%H%M%S}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class CsvExportAdmin(admin.ModelAdmin):
    """An admin list with an ``export/`` view (the changelist's current filters and search, as CSV)
    and an ``export_csv`` action (the selected rows); name the action in ``actions`` to offer it.

    The view's URL is ``admin:<app>_<model>_export``; the list's template links to it.
    """

    csv_filename_prefix = "export"

    def csv_lines(self, queryset: QuerySet[Any]) -> Iterator[str]:
        raise NotImplementedError

    def get_urls(self) -> list[URLPattern]:
        export = path(
            "export/",
            self.admin_site.admin_view(self.export_view),
            name=f"{self.opts.app_label}_{self.opts.model_name}_export",
        )
        return [export, *super().get_urls()]

    def export_view(self, request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
        """The changelist's current filters and search, as CSV (the "Export" link)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        changelist = self.get_changelist_instance(request)
        return self._csv_response(request, changelist.get_queryset(request))

    @admin.action(description="Export selected as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[Any]) -> StreamingHttpResponse:
        return self._csv_response(request, queryset)

    def _csv_response(self, request: HttpRequest, queryset: QuerySet[Any]) -> StreamingHttpResponse:
        return csv_response(
            request=request, lines=self.csv_lines(queryset), filename_prefix=self.csv_filename_prefix
        )


class RecordAdmin(CsvExportAdmin):
    """The admin of a record (the audit trail, the LLM gateway's usage): listed, filtered and
    exported, never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

"""Rolling finished UTC days of tool calls up into ``ToolCallDay`` and ``ToolCallDayTotal``, and
over every tenant at once into ``AllTenantsToolCallDay`` and ``AllTenantsToolCallDayTotal``.

See the package's docstring for when a day is rolled up, again, and by whom.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from core.audit.rollup.models import (
    AllTenantsToolCallDay,
    AllTenantsToolCallDayTotal,
    RolledUpDay,
    ToolCallDay,
    ToolCallDayTotal,
)
from core.audit.rollup.percentiles import PERCENTILES, Percentile, percentile_interpolated
from core.models import AuditAction, AuditEvent, AuditOutcome

logger = logging.getLogger(__name__)

# The console's overview shows 30 days; a few more cover a worker stopped over a long weekend.
ROLLUP_DAYS = 35
# A day is rolled up once it has been over this long, so the rows of calls in flight at midnight
# are in it the first time rather than the second.
ROLLUP_SETTLE = timedelta(minutes=10)
# How often each ``jobs_worker`` runs it: a finished day reaches the rollup within this.
ROLLUP_INTERVAL_SECONDS = 300
# pg_advisory_lock's key: one roll-up at a time in the whole database ("rollup" in ASCII).
_LOCK_KEY = 0x726F6C6C7570


def tool_call_days_roll_up(*, now: datetime, days: int = ROLLUP_DAYS) -> list[date]:
    """Roll up each finished day of the last ``days`` that is not rolled up yet or has had rows
    since; the days rolled up, oldest first. Safe to run at any time, twice, and at once."""
    end = (now - ROLLUP_SETTLE).astimezone(UTC).date()
    first = end - timedelta(days=days)
    with _rolling_alone():
        # Read under the lock: a run that waited for another finds the days it did done.
        arrived = _tool_calls_per_day(first=first, end=end)
        rolled = dict(RolledUpDay.objects.filter(day__gte=first, day__lt=end).values_list("day", "calls"))
        due = [
            day
            for day in (first + timedelta(days=n) for n in range(days))
            if day not in rolled or arrived.get(day, 0) > rolled[day]
        ]
        for day in due:
            _day_roll_up(day=day)
    if due:
        logger.info("Rolled up the tool calls of %d day(s): %s to %s", len(due), due[0], due[-1])
    return due


def _tool_calls_per_day(*, first: date, end: date) -> dict[date, int]:
    """Every tenant's tool calls per day, as one ``GROUP BY`` that the ``(action, created)`` index
    answers: much cheaper than rolling a day up, so it runs over every day each time."""
    rows = (
        _tool_calls(start=_midnight(first), end=_midnight(end))
        .annotate(day=TruncDate("created", tzinfo=UTC))
        .values("day")
        .annotate(calls=Count("*"))
        .order_by()
    )
    return {row["day"]: row["calls"] for row in rows}


def _day_roll_up(*, day: date) -> None:
    """One day's rows, replaced (upserts: a tool's row is never deleted, see the package's
    docstring on retention), and the day marked rolled up with the number of rows it read."""
    calls = _tool_calls(start=_midnight(day), end=_midnight(day + timedelta(days=1)))
    not_ok = ~Q(outcome=AuditOutcome.OK)
    with transaction.atomic():
        tools = list(
            calls.values("tenant_id", "target")
            .annotate(calls=Count("id"), errors=Count("id", filter=not_ok))
            .order_by("tenant_id", "target")
        )
        totals = _totals_per_tenant(calls.filter(tenant_id__isnull=False))
        # Every tenant's and those of none: the operators' dashboard counts them all.
        everyone = _total_of_all(calls)
        all_tools: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "errors": 0})
        for row in tools:
            all_tools[row["target"]]["calls"] += row["calls"]
            all_tools[row["target"]]["errors"] += row["errors"]
        ToolCallDay.objects.bulk_create(
            [
                ToolCallDay(
                    tenant_id=row["tenant_id"],
                    day=day,
                    tool=row["target"],
                    calls=row["calls"],
                    errors=row["errors"],
                )
                for row in tools
                if row["tenant_id"] is not None
            ],
            update_conflicts=True,
            unique_fields=["tenant", "day", "tool"],
            update_fields=["calls", "errors"],
        )
        ToolCallDayTotal.objects.bulk_create(
            [ToolCallDayTotal(day=day, **row) for row in totals],
            update_conflicts=True,
            unique_fields=["tenant", "day"],
            update_fields=["calls", "errors", "timed_calls", "p50_ms", "p95_ms"],
        )
        AllTenantsToolCallDay.objects.bulk_create(
            [AllTenantsToolCallDay(day=day, tool=tool, **sums) for tool, sums in all_tools.items()],
            update_conflicts=True,
            unique_fields=["day", "tool"],
            update_fields=["calls", "errors"],
        )
        AllTenantsToolCallDayTotal.objects.bulk_create(
            [AllTenantsToolCallDayTotal(day=day, **everyone)],
            update_conflicts=True,
            unique_fields=["day"],
            update_fields=["calls", "errors", "timed_calls", "p50_ms", "p95_ms"],
        )
        # The count the next run compares with, taken from the same statement as the tools' rows.
        RolledUpDay.objects.bulk_create(
            [RolledUpDay(day=day, calls=sum(row["calls"] for row in tools), rolled_at=timezone.now())],
            update_conflicts=True,
            unique_fields=["day"],
            update_fields=["calls", "rolled_at"],
        )


def _totals_per_tenant(calls: QuerySet[AuditEvent]) -> list[dict[str, Any]]:
    """Each tenant's calls, errors and p50/p95 duration of the day: PostgreSQL's ``percentile_cont``
    in the same ``GROUP BY``, elsewhere the durations read in order and interpolated the same way."""
    sums: dict[str, Any] = {
        "calls": Count("id"),
        "errors": Count("id", filter=~Q(outcome=AuditOutcome.OK)),
        "timed_calls": Count("duration_ms"),
    }
    postgres = connection.vendor == "postgresql"
    if postgres:
        sums |= {f"{name}_ms": Percentile("duration_ms", fraction=f) for name, f in PERCENTILES.items()}
    rows = list(calls.values("tenant_id").annotate(**sums).order_by("tenant_id"))
    if not postgres:
        durations: dict[int, list[float]] = defaultdict(list)
        timed = calls.filter(duration_ms__isnull=False).order_by("tenant_id", "duration_ms")
        for tenant_id, duration in timed.values_list("tenant_id", "duration_ms"):
            if tenant_id is not None and duration is not None:  # filtered out above; mypy cannot know
                durations[tenant_id].append(duration)
        for row in rows:
            row |= {
                f"{name}_ms": percentile_interpolated(durations[row["tenant_id"]], f)
                for name, f in PERCENTILES.items()
            }
    return rows


def _total_of_all(calls: QuerySet[AuditEvent]) -> dict[str, Any]:
    """The day's calls, errors and p50/p95 duration over every row, as ``_totals_per_tenant``
    computes each tenant's: one aggregate on PostgreSQL, elsewhere the durations read in order."""
    sums: dict[str, Any] = {
        "calls": Count("id"),
        "errors": Count("id", filter=~Q(outcome=AuditOutcome.OK)),
        "timed_calls": Count("duration_ms"),
    }
    if connection.vendor == "postgresql":
        sums |= {f"{name}_ms": Percentile("duration_ms", fraction=f) for name, f in PERCENTILES.items()}
        return calls.aggregate(**sums)
    total = calls.aggregate(**sums)
    timed = calls.filter(duration_ms__isnull=False).order_by("duration_ms")
    durations = [duration for duration in timed.values_list("duration_ms", flat=True) if duration is not None]
    return total | {f"{name}_ms": percentile_interpolated(durations, f) for name, f in PERCENTILES.items()}


def _tool_calls(*, start: datetime, end: datetime) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(action=AuditAction.TOOL_CALLED, created__gte=start, created__lt=end)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


@contextmanager
def _rolling_alone() -> Iterator[None]:
    """One run at a time on PostgreSQL (a second waits for the first); SQLite lets one writer in at
    a time anyway, and the upserts make an overlapping run harmless."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [_LOCK_KEY])
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])
        except DatabaseError:
            # The session lock ends with its connection.
            connection.close()

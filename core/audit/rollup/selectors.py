"""Tool calls per day, busiest tools and calls per tenant, for one tenant or for every tenant at once:
the rolled-up days read from the rollup, the others (today, a day not rolled up yet) aggregated
live from the audit rows, which gives the same figures as aggregating every day live.

``tenant_id=None`` means every tenant together, and the calls of no tenant with them (the
``AllTenants*`` tables), as the operators' dashboard counts them; an id, that tenant's calls only.

A caller that reads several series of the same range reads which days are rolled up once
(``day_split_read``) and passes the split to each.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from core.audit.rollup.models import (
    AllTenantsToolCallDay,
    AllTenantsToolCallDayTotal,
    RolledUpDay,
    ToolCallDay,
    ToolCallDayTotal,
)
from core.audit.rollup.percentiles import PERCENTILES, Percentile, percentile_interpolated
from core.models import AuditAction, AuditEvent, AuditOutcome


@dataclass(frozen=True)
class ToolDay:
    """One UTC day's tool calls; the percentiles are of the calls that carry a duration (None if none)."""

    day: date
    calls: int = 0
    errors: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None


@dataclass(frozen=True)
class ToolUse:
    name: str
    calls: int
    errors: int


@dataclass(frozen=True)
class DaySplit:
    """The days from ``first_day`` to ``last_day``: those the rollup holds, and the others."""

    first_day: date
    last_day: date
    rolled: list[date]
    live: list[date]

    @property
    def days(self) -> list[date]:
        return _days(first_day=self.first_day, last_day=self.last_day)


def rolled_up_day_list(*, first_day: date, last_day: date) -> list[date]:
    """The days from ``first_day`` to ``last_day`` (both included) that are rolled up, in order."""
    return list(
        RolledUpDay.objects.filter(day__gte=first_day, day__lte=last_day)
        .order_by("day")
        .values_list("day", flat=True)
    )


def day_split_read(*, first_day: date, last_day: date) -> DaySplit:
    """Which days of the range to read from the rollup and which live: one query."""
    rolled = rolled_up_day_list(first_day=first_day, last_day=last_day)
    done = set(rolled)
    live = [day for day in _days(first_day=first_day, last_day=last_day) if day not in done]
    return DaySplit(first_day=first_day, last_day=last_day, rolled=rolled, live=live)


def tool_day_list(*, tenant_id: int | None, split: DaySplit) -> list[ToolDay]:
    """Calls, errors (any outcome but ``ok``) and p50/p95 duration of the tool calls, every day of
    the range present (zeros on a day without calls).

    Rolled-up days are their total rows (none: no calls). The other days are one ``GROUP BY`` of the
    audit rows: on PostgreSQL with the percentiles in it; elsewhere (the SQLite file of a
    development run) one more query reads the days' durations in order and they are interpolated
    here the way ``percentile_cont`` does, fine for the size of such a database.
    """
    rows: dict[date, dict[str, Any]] = {}
    if split.rolled:
        totals: QuerySet[Any] = (
            AllTenantsToolCallDayTotal.objects.filter(day__in=split.rolled)
            if tenant_id is None
            else ToolCallDayTotal.objects.filter(tenant_id=tenant_id, day__in=split.rolled)
        )
        for total in totals.values("day", "calls", "errors", "p50_ms", "p95_ms"):
            rows[total["day"]] = {
                "calls": total["calls"],
                "errors": total["errors"],
                "p50": total["p50_ms"],
                "p95": total["p95_ms"],
            }
    if split.live:
        rows |= _tool_days_live(tenant_id=tenant_id, days=split.live)
    empty: dict[str, Any] = {"calls": 0, "errors": 0, "p50": None, "p95": None}
    found = []
    for day in split.days:
        row = rows.get(day, empty)
        found.append(
            ToolDay(
                day=day,
                calls=row["calls"],
                errors=row["errors"],
                p50_ms=_rounded(row["p50"]),
                p95_ms=_rounded(row["p95"]),
            )
        )
    return found


def tool_use_list_busiest(*, tenant_id: int | None, split: DaySplit, limit: int) -> list[ToolUse]:
    """The most called tools, most calls first (then by name), with their errors; over every tenant
    a name served in several is one tool, its calls summed.

    One query: the rolled-up days' tool rows and the other days' audit rows grouped by tool, added
    up and ordered by the database, so names that tie sort by its collation as they would if every
    day were live.
    """
    parts: list[QuerySet[Any, Any]] = []
    if split.rolled:
        tools: QuerySet[Any] = (
            AllTenantsToolCallDay.objects.filter(day__in=split.rolled)
            if tenant_id is None
            else ToolCallDay.objects.filter(tenant_id=tenant_id, day__in=split.rolled)
        )
        parts.append(tools.values(name=F("tool"), tool_calls=F("calls"), tool_errors=F("errors")).order_by())
    if split.live:
        parts.append(
            _tool_calls(tenant_id=tenant_id, days=split.live)
            .values(name=F("target"))
            .annotate(tool_calls=Count("id"), tool_errors=Count("id", filter=_NOT_OK))
            .order_by()
        )
    if not parts:
        return []
    united = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    # The ORM cannot group a union; its SQL is the ORM's own, every value a parameter.
    sql, params = united.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, SUM(tool_calls) AS calls, SUM(tool_errors) AS errors"  # noqa: S608
            f" FROM ({sql}) AS tools GROUP BY name ORDER BY calls DESC, name LIMIT %s",
            [*params, limit],
        )
        found = cursor.fetchall()
    return [ToolUse(name=name, calls=int(calls), errors=int(errors)) for name, calls, errors in found]


def tool_use_per_tenant(*, split: DaySplit) -> dict[int, tuple[int, int]]:
    """Each tenant's tool calls and errors over the range, by tenant id (calls of no tenant left
    out); tenants without a call are absent. Two queries at most: the rolled-up days' totals and
    the other days' audit rows, each grouped by tenant, added up here."""
    found: dict[int, tuple[int, int]] = defaultdict(lambda: (0, 0))
    parts: list[QuerySet[Any, Any]] = []
    if split.rolled:
        parts.append(
            ToolCallDayTotal.objects.filter(day__in=split.rolled)
            .values("tenant_id")
            .annotate(tenant_calls=Sum("calls"), tenant_errors=Sum("errors"))
            .order_by()
        )
    if split.live:
        parts.append(
            _tool_calls(tenant_id=None, days=split.live)
            .filter(tenant_id__isnull=False)
            .values("tenant_id")
            .annotate(tenant_calls=Count("id"), tenant_errors=Count("id", filter=_NOT_OK))
            .order_by()
        )
    for part in parts:
        for row in part:
            calls, errors = found[row["tenant_id"]]
            found[row["tenant_id"]] = (calls + int(row["tenant_calls"]), errors + int(row["tenant_errors"]))
    return dict(found)


_NOT_OK = ~Q(outcome=AuditOutcome.OK)


def _tool_days_live(*, tenant_id: int | None, days: list[date]) -> dict[date, dict[str, Any]]:
    calls = _tool_calls(tenant_id=tenant_id, days=days).annotate(day=TruncDate("created", tzinfo=UTC))
    sums: dict[str, Any] = {"calls": Count("id"), "errors": Count("id", filter=_NOT_OK)}
    postgres = connection.vendor == "postgresql"
    if postgres:
        sums |= {name: Percentile("duration_ms", fraction=f) for name, f in PERCENTILES.items()}
    rows = {row["day"]: row for row in calls.values("day").annotate(**sums).order_by()}
    if not postgres:
        durations: dict[date, list[float]] = defaultdict(list)
        timed = calls.filter(duration_ms__isnull=False).order_by("day", "duration_ms")
        for day, duration in timed.values_list("day", "duration_ms"):
            if duration is not None:  # filtered out above; mypy cannot know
                durations[day].append(duration)
        for day, row in rows.items():
            row |= {name: percentile_interpolated(durations[day], f) for name, f in PERCENTILES.items()}
    return rows


def _tool_calls(*, tenant_id: int | None, days: list[date]) -> QuerySet[AuditEvent]:
    """The tool calls on ``days`` (in order), of one tenant or of all: one range of ``created`` per
    run of consecutive days, so the usual case (every day, or today only) is one range on the index."""
    ranges = Q()
    for first, last in _runs(days):
        ranges |= Q(created__gte=_midnight(first), created__lt=_midnight(last + timedelta(days=1)))
    calls = AuditEvent.objects.filter(ranges, action=AuditAction.TOOL_CALLED)
    return calls if tenant_id is None else calls.filter(tenant_id=tenant_id)


def _runs(days: list[date]) -> list[tuple[date, date]]:
    """Consecutive days as (first, last) pairs: [1, 2, 3, 5] is (1, 3) and (5, 5)."""
    runs: list[tuple[date, date]] = []
    for day in days:
        if runs and runs[-1][1] + timedelta(days=1) == day:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    return runs


def _days(*, first_day: date, last_day: date) -> list[date]:
    return [first_day + timedelta(days=n) for n in range((last_day - first_day).days + 1)]


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)

"""What every tenant together did in the last 30 days, for the operators' dashboard: tool calls,
errors and latency per day, the busiest tools and tenants, model spend per day.

The shapes are the console overview's (``ToolDay``, ``ToolUse``, ``Spent``), counted the same way
(``core.audit.rollup.selectors``, as ``portal.console.overview_selectors`` does for one tenant, and
``language_models.governed.totals``), without the tenant filter. Calling the per-tenant selectors
once per tenant would cost queries in proportion to the number of tenants; here every series is
one ``GROUP BY`` over all of them, so the number of queries is the same whatever the number of
tenants or rows. Days are UTC.

Tool calls are read from the daily rollup (``core.audit.rollup``: its all-tenant rows, and each
tenant's totals for the busiest tenants) for the days it holds, and aggregated live from the audit
rows for the others (today, a day not rolled up yet): the same figures as aggregating every day
live. Which days are rolled up is read once per ``traffic_read``, for every series.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDate

from accounts.models import Tenant
from core.audit.rollup.selectors import (
    DaySplit,
    ToolDay,
    ToolUse,
    day_split_read,
    tool_day_list,
    tool_use_list_busiest,
    tool_use_per_tenant,
)
from language_models.governed.totals import Spent
from language_models.models import LlmUsage, UsageOutcome
from portal.console.overview_selectors import OVERVIEW_DAYS

BUSIEST_TOOLS = 10
BUSIEST_TENANTS = 10


@dataclass(frozen=True)
class TenantUse:
    """One tenant's share of the period: its tool calls and errors, and its model calls and cost."""

    slug: str
    name: str
    calls: int
    errors: int
    model_calls: int
    tokens: int
    cost: float


@dataclass(frozen=True)
class Traffic:
    first_day: date
    last_day: date
    tool_days: list[ToolDay]
    busiest_tools: list[ToolUse]
    model_days: list[tuple[date, Spent]]
    busiest_tenants: list[TenantUse]
    tenants_active: int

    @property
    def calls(self) -> int:
        return sum(day.calls for day in self.tool_days)

    @property
    def errors(self) -> int:
        return sum(day.errors for day in self.tool_days)

    @property
    def cost(self) -> float:
        return round(sum(spent.cost for _, spent in self.model_days), 6)


def traffic_read(*, now: datetime) -> Traffic:
    """Every tenant's traffic for the ``OVERVIEW_DAYS`` UTC days that end today (``now``'s day)."""
    last_day = now.astimezone(UTC).date()
    first_day = last_day - timedelta(days=OVERVIEW_DAYS - 1)
    split = day_split_read(first_day=first_day, last_day=last_day)
    tenants = tenant_list_busiest(split=split)
    return Traffic(
        first_day=first_day,
        last_day=last_day,
        tool_days=tool_call_list_per_day_all(split=split),
        busiest_tools=tool_list_busiest_all(split=split),
        model_days=usage_list_per_day_all(first_day=first_day, last_day=last_day),
        busiest_tenants=tenants[:BUSIEST_TENANTS],
        tenants_active=len(tenants),
    )


def tool_call_list_per_day_all(*, split: DaySplit) -> list[ToolDay]:
    """Calls, errors (any outcome but ``ok``) and p50/p95 duration of every tenant's tool calls, and
    those of no tenant, per day: the rolled-up days' ``AllTenantsToolCallDayTotal`` rows (their
    percentiles computed over every row of the day when it was rolled up), the others live."""
    return tool_day_list(tenant_id=None, split=split)


def tool_list_busiest_all(*, split: DaySplit, limit: int = BUSIEST_TOOLS) -> list[ToolUse]:
    """The most called tools over every tenant (a name served by several counts once, summed), most
    calls first, then by name."""
    return tool_use_list_busiest(tenant_id=None, split=split, limit=limit)


def usage_list_per_day_all(*, first_day: date, last_day: date) -> list[tuple[date, Spent]]:
    """Model calls, tokens and cost of every tenant per day, ended calls only (a pending record is a
    reservation, not spending), every day of the range present."""
    rows = {
        row["day"]: _spent(row)
        for row in _usage(first_day=first_day, last_day=last_day)
        .annotate(day=TruncDate("created", tzinfo=UTC))
        .values("day")
        .annotate(**_USAGE_SUMS)
        .order_by()
    }
    return [(day, rows.get(day, Spent())) for day in _days(first_day=first_day, last_day=last_day)]


def tenant_list_busiest(*, split: DaySplit) -> list[TenantUse]:
    """Every tenant with a tool call or a model call in the range, most tool calls first, then by
    model cost and slug. Four queries at most (tool calls rolled up and live, model use, the
    tenants' names), however many tenants."""
    tools = tool_use_per_tenant(split=split)
    models = {
        row["tenant_id"]: row
        for row in _usage(first_day=split.first_day, last_day=split.last_day)
        .values("tenant_id")
        .annotate(**_USAGE_SUMS)
        .order_by()
    }
    named = {
        row["id"]: row
        for row in Tenant.objects.filter(id__in=tools.keys() | models.keys()).values("id", "slug", "name")
    }
    found = []
    for tenant_id, tenant in named.items():
        calls, errors = tools.get(tenant_id, (0, 0))
        model_row = models.get(tenant_id)
        spent = _spent(model_row) if model_row else Spent()
        found.append(
            TenantUse(
                slug=tenant["slug"],
                name=tenant["name"],
                calls=calls,
                errors=errors,
                model_calls=spent.calls,
                tokens=spent.total_tokens,
                cost=spent.cost,
            )
        )
    return sorted(found, key=lambda use: (-use.calls, -use.cost, use.slug))


_USAGE_SUMS: dict[str, Any] = {
    "calls": Count("id"),
    "tokens": Sum("total_tokens"),
    "spent_cost": Sum("cost"),
}


def _usage(*, first_day: date, last_day: date) -> QuerySet[LlmUsage]:
    start, end = _bounds(first_day=first_day, last_day=last_day)
    return LlmUsage.objects.filter(created__gte=start, created__lt=end).exclude(outcome=UsageOutcome.PENDING)


def _bounds(*, first_day: date, last_day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(first_day, time.min, tzinfo=UTC)
    return start, datetime.combine(last_day + timedelta(days=1), time.min, tzinfo=UTC)


def _spent(row: dict[str, Any]) -> Spent:
    return Spent(
        calls=int(row["calls"] or 0),
        total_tokens=int(row["tokens"] or 0),
        cost=float(round(row["spent_cost"] or Decimal(0), 8)),
    )


def _days(*, first_day: date, last_day: date) -> list[date]:
    return [first_day + timedelta(days=n) for n in range((last_day - first_day).days + 1)]

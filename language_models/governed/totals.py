"""What a tenant spent on models: totals and per-day, per-model and per-feature series of its usage
records, for ``GET /api/v1/usage`` (and anything else that reports spending).

Only ended calls count: a ``pending`` record holds a reservation, not spending. Days are UTC, as
budgets count them. One query per grouping, each served by the ``(tenant, created)`` index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from language_models.models import LlmUsage, UsageOutcome


@dataclass(frozen=True)
class Spent:
    """Calls, tokens and cost of a set of records; ``cost`` sums the records that have one, and
    ``unpriced_calls`` says how many spent tokens without one."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0


@dataclass(frozen=True)
class UsageTotals:
    first_day: date
    last_day: date
    total: Spent
    by_day: list[tuple[date, Spent]] = field(default_factory=list)
    by_model: list[tuple[str, Spent]] = field(default_factory=list)
    by_feature: list[tuple[str, Spent]] = field(default_factory=list)


_SUMS: dict[str, Any] = {
    "calls": Count("id"),
    "prompt": Sum("prompt_tokens"),
    "completion": Sum("completion_tokens"),
    "tokens": Sum("total_tokens"),
    "spent_cost": Sum("cost"),
    # Calls that spent tokens nobody could price (no operator price, unknown to litellm).
    "unpriced": Count("id", filter=Q(cost__isnull=True, total_tokens__gt=0)),
}


def usage_totals(
    *, tenant_id: int, first_day: date, last_day: date, model: str | None = None, feature: str | None = None
) -> UsageTotals:
    """The tenant's spending from ``first_day`` to ``last_day`` (UTC, both included), optionally of
    one model (as recorded: without its provider prefix) or one feature."""
    records = _records(tenant_id=tenant_id, first_day=first_day, last_day=last_day)
    if model:
        records = records.filter(model=model)
    if feature:
        records = records.filter(feature=feature)
    days = {
        row["day"]: _spent(row)
        for row in records.annotate(day=TruncDate("created", tzinfo=UTC)).values("day").annotate(**_SUMS)
    }
    return UsageTotals(
        first_day=first_day,
        last_day=last_day,
        total=_spent(records.aggregate(**_SUMS)),
        # Every day of the range, those without a call too: a chart's axis has no gaps.
        by_day=[
            (day, days.get(day, Spent()))
            for day in (first_day + timedelta(days=n) for n in range((last_day - first_day).days + 1))
        ],
        by_model=_grouped(records, "model"),
        by_feature=_grouped(records, "feature"),
    )


def usage_spent(*, records: QuerySet[LlmUsage]) -> Spent:
    """The spending of ``records`` (an operator's filtered list), ended calls only."""
    return _spent(records.exclude(outcome=UsageOutcome.PENDING).order_by().aggregate(**_SUMS))


def _records(*, tenant_id: int, first_day: date, last_day: date) -> QuerySet[LlmUsage]:
    start = datetime.combine(first_day, time.min, tzinfo=UTC)
    end = datetime.combine(last_day + timedelta(days=1), time.min, tzinfo=UTC)
    return LlmUsage.objects.filter(tenant_id=tenant_id, created__gte=start, created__lt=end).exclude(
        outcome=UsageOutcome.PENDING
    )


def _grouped(records: QuerySet[LlmUsage], key: str) -> list[tuple[str, Spent]]:
    rows = records.values(key).annotate(**_SUMS).order_by(key)
    return [(str(row[key]), _spent(row)) for row in rows]


def _spent(row: dict[str, Any]) -> Spent:
    calls = int(row["calls"] or 0)
    return Spent(
        calls=calls,
        prompt_tokens=int(row["prompt"] or 0),
        completion_tokens=int(row["completion"] or 0),
        total_tokens=int(row["tokens"] or 0),
        cost=float(round(row["spent_cost"] or Decimal(0), 8)),
        unpriced_calls=int(row["unpriced"] or 0),
    )

"""Budgets: before a call, is the tenant's (or this person's) allowance for the UTC day or month spent?

What counts is the usage records (``LlmUsage``) since the period began, every outcome included
(a failed call usually spent nothing, and then adds nothing), and the reservations of the calls in
flight. A budget is spent once the sum reaches its limit; the refusal names the budget whose reset
is furthest away, since retrying at an earlier reset would only be refused again.

Two queries at most: the budgets, then (only if there are any) one aggregate of the month's
records that sums the day and the month, the tenant and the person, at once (the index on
``(tenant, created)`` serves it).

Concurrent calls: ``usage_begin`` checks and reserves in one transaction that holds the tenant's
lock (a PostgreSQL advisory lock; SQLite's ``IMMEDIATE`` transactions serialize every writer
anyway). A call in flight is a ``pending`` record whose tokens and cost are its reservation: its
prompt at four characters a token and its whole ``max_tokens``. So whatever the number of workers,
a call starts only while what is recorded plus what is reserved is under the limit, and a budget is
exceeded by at most the last call started under it (and by what a call in flight spends beyond its
reservation, which only a prompt of unusually short tokens makes possible). A reservation whose
worker died (killed mid-call) stops counting after ``PENDING_COUNTS_SECONDS``, longer than any
call may last.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, QuerySet, Sum

from core.errors import BudgetExceeded
from language_models.models import BudgetPeriod, LlmBudget, LlmUsage, UsageOutcome

# Longer than the longest a call may take (the model's timeout is at most 600 s, retries included).
PENDING_COUNTS_SECONDS = 900

BUDGET_EXCEEDED = (
    "The {whose} {period_name} language model budget is spent: {used} of {limit} {unit}. It resets at "
    "{resets_at}."
)
_WHOSE = {"tenant": "tenant's", "person": "caller's"}
_PERIOD_NAMES = {BudgetPeriod.DAY: "daily", BudgetPeriod.MONTH: "monthly"}


def budget_period_bounds(*, period: str, now: datetime) -> tuple[datetime, datetime]:
    """When the UTC day or month containing ``now`` began, and when the next one begins."""
    now = now.astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == BudgetPeriod.DAY:
        return day, day + timedelta(days=1)
    month = day.replace(day=1)
    following = (
        month.replace(year=month.year + 1, month=1)
        if month.month == 12
        else month.replace(month=month.month + 1)
    )
    return month, following


def budget_counted_records(*, tenant_id: int, now: datetime) -> QuerySet[LlmUsage]:
    """The tenant's records that count against its budgets this UTC month: every ended call, and
    the reservations of the calls still in flight."""
    month_start, _ = budget_period_bounds(period=BudgetPeriod.MONTH, now=now)
    counted = ~Q(outcome=UsageOutcome.PENDING) | Q(
        created__gte=now - timedelta(seconds=PENDING_COUNTS_SECONDS)
    )
    return LlmUsage.objects.filter(counted, tenant_id=tenant_id, created__gte=month_start)


def budget_check(*, tenant_id: int, user_id: int) -> None:
    """``BudgetExceeded`` when a budget of the tenant, or of this person in it, is spent for its period."""
    budgets = list(LlmBudget.objects.filter(Q(user__isnull=True) | Q(user_id=user_id), tenant_id=tenant_id))
    if not budgets:
        return
    now = datetime.now(UTC)
    day_start, _ = budget_period_bounds(period=BudgetPeriod.DAY, now=now)
    today = Q(created__gte=day_start)
    mine = Q(user_id=user_id)
    totals = budget_counted_records(tenant_id=tenant_id, now=now).aggregate(
        tenant_month_tokens=Sum("total_tokens"),
        tenant_month_cost=Sum("cost"),
        tenant_day_tokens=Sum("total_tokens", filter=today),
        tenant_day_cost=Sum("cost", filter=today),
        person_month_tokens=Sum("total_tokens", filter=mine),
        person_month_cost=Sum("cost", filter=mine),
        person_day_tokens=Sum("total_tokens", filter=mine & today),
        person_day_cost=Sum("cost", filter=mine & today),
    )
    spent: list[BudgetExceeded] = []
    for budget in budgets:
        whose = "tenant" if budget.user_id is None else "person"
        limits: list[tuple[str, int | Decimal]] = []
        if budget.max_tokens is not None:
            limits.append(("tokens", budget.max_tokens))
        if budget.max_cost is not None:
            limits.append(("cost", budget.max_cost))
        for kind, limit in limits:
            used = totals[f"{whose}_{budget.period}_{kind}"] or 0
            if used >= limit:
                spent.append(
                    _exceeded(whose=whose, period=budget.period, kind=kind, used=used, limit=limit, now=now)
                )
    if spent:
        # The one that resets last; on the month's last day a day's and the month's reset together,
        # and the month's is named (the longer wait it stands for, and an order that does not
        # depend on the rows').
        raise max(
            spent, key=lambda error: (error.retry_after_seconds, _period_of(error) == BudgetPeriod.MONTH)
        )


def _period_of(error: BudgetExceeded) -> str:
    return str((error.data or {}).get("period", ""))


def _exceeded(
    *, whose: str, period: str, kind: str, used: int | Decimal, limit: int | Decimal, now: datetime
) -> BudgetExceeded:
    _, resets = budget_period_bounds(period=period, now=now)
    resets_at = resets.isoformat().replace("+00:00", "Z")
    shown_used: int | float = int(used) if kind == "tokens" else float(round(Decimal(used), 6))
    shown_limit: int | float = int(limit) if kind == "tokens" else float(limit)
    return BudgetExceeded(
        BUDGET_EXCEEDED.format(
            whose=_WHOSE[whose],
            period_name=_PERIOD_NAMES[BudgetPeriod(period)],
            used=shown_used,
            limit=shown_limit,
            unit="tokens" if kind == "tokens" else "US dollars",
            resets_at=resets_at,
        ),
        retry_after_seconds=max(1, math.ceil((resets - now).total_seconds())),
        budget=whose,
        period=period,
        kind=kind,
        used=shown_used,
        limit=shown_limit,
        resetsAt=resets_at,
    )


@dataclass(frozen=True)
class BudgetSpending:
    """A budget and what counts against it so far in its current period (as ``budget_check`` sums it)."""

    budget: LlmBudget
    tokens: int
    cost: Decimal
    resets_at: datetime


def budget_list_with_spending(*, tenant_id: int) -> list[BudgetSpending]:
    """The tenant's budgets (tenant-wide first, then people by username, days before months),
    each with its spending: three queries whatever the number of budgets and people."""
    budgets = list(
        LlmBudget.objects.filter(tenant_id=tenant_id)
        .select_related("user")
        .order_by(F("user__username").asc(nulls_first=True), "period")
    )
    if not budgets:
        return []
    now = datetime.now(UTC)
    day_start, _ = budget_period_bounds(period=BudgetPeriod.DAY, now=now)
    today = Q(created__gte=day_start)
    sums = {
        "month_tokens": Sum("total_tokens"),
        "month_cost": Sum("cost"),
        "day_tokens": Sum("total_tokens", filter=today),
        "day_cost": Sum("cost", filter=today),
    }
    records = budget_counted_records(tenant_id=tenant_id, now=now)
    totals: dict[int | None, dict[str, Any]] = {None: records.aggregate(**sums)}
    people = {budget.user_id for budget in budgets if budget.user_id is not None}
    if people:
        for row in records.filter(user_id__in=people).values("user_id").annotate(**sums).order_by():
            totals[row["user_id"]] = row
    spending = []
    for budget in budgets:
        row = totals.get(budget.user_id, {})
        spending.append(
            BudgetSpending(
                budget=budget,
                tokens=int(row.get(f"{budget.period}_tokens") or 0),
                cost=Decimal(row.get(f"{budget.period}_cost") or 0),
                resets_at=budget_period_bounds(period=budget.period, now=now)[1],
            )
        )
    return spending

"""What the console's overview shows of a tenant: tool calls, errors and latency per day, the busiest
tools, model spend per day and against each budget, connected clients and live MCP sessions.

Every figure is an aggregate computed in the database (a ``GROUP BY`` per series), so the number of
queries is the same whatever the number of audit or usage rows. Days are UTC, as budgets count them,
and every day of the range is present, with zeros, so a chart's axis has no gaps.

Tool calls are read from the daily rollup (``core.audit.rollup``) for the days it holds and
aggregated live from the audit rows for the others (today, a day not rolled up yet): the same
figures as aggregating every day live, without reading a busy tenant's million rows per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, Sum

from core.audit.rollup.selectors import ToolDay, ToolUse, day_split_read, tool_day_list, tool_use_list_busiest
from core.conf import gatehouse_settings
from language_models.governed.budgets import budget_counted_records, budget_period_bounds
from language_models.governed.totals import Spent, usage_totals
from language_models.models import BudgetPeriod, LlmBudget
from mcp_gateway.models import McpSession
from oauth.models import AccessToken

OVERVIEW_DAYS = 30
BUSIEST_TOOLS = 10
CLIENTS_SHOWN = 10


@dataclass(frozen=True)
class BudgetUse:
    """A budget and what its current period has spent, counted as the budget check counts it."""

    period: str
    person: str  # "" for the whole tenant
    max_tokens: int | None
    tokens_spent: int
    max_cost: float | None
    cost_spent: float
    resets_at: datetime


@dataclass(frozen=True)
class ClientUse:
    name: str
    live_tokens: int


@dataclass(frozen=True)
class Overview:
    first_day: date
    last_day: date
    tool_days: list[ToolDay]
    busiest_tools: list[ToolUse]
    model_days: list[tuple[date, Spent]]
    budgets: list[BudgetUse]
    clients: list[ClientUse]
    clients_connected: int
    sessions_live: int

    @property
    def calls(self) -> int:
        return sum(day.calls for day in self.tool_days)

    @property
    def errors(self) -> int:
        return sum(day.errors for day in self.tool_days)


def overview_read(*, tenant_id: int, now: datetime) -> Overview:
    """The tenant's overview for the ``OVERVIEW_DAYS`` UTC days that end today (``now``'s day)."""
    last_day = now.astimezone(UTC).date()
    first_day = last_day - timedelta(days=OVERVIEW_DAYS - 1)
    clients = client_list_connected(tenant_id=tenant_id, now=now)
    return Overview(
        first_day=first_day,
        last_day=last_day,
        tool_days=tool_call_list_per_day(tenant_id=tenant_id, first_day=first_day, last_day=last_day),
        busiest_tools=tool_list_busiest(tenant_id=tenant_id, first_day=first_day, last_day=last_day),
        model_days=usage_totals(tenant_id=tenant_id, first_day=first_day, last_day=last_day).by_day,
        budgets=budget_list_with_spend(tenant_id=tenant_id, now=now),
        clients=clients[:CLIENTS_SHOWN],
        clients_connected=len(clients),
        sessions_live=session_count_live(tenant_id=tenant_id, now=now),
    )


def tool_call_list_per_day(*, tenant_id: int, first_day: date, last_day: date) -> list[ToolDay]:
    """Calls, errors (any outcome but ``ok``) and p50/p95 duration of the tenant's tool calls, per day:
    the rolled-up days' ``ToolCallDayTotal`` rows, the others aggregated live
    (``core.audit.rollup.selectors.tool_day_list``)."""
    split = day_split_read(first_day=first_day, last_day=last_day)
    return tool_day_list(tenant_id=tenant_id, split=split)


def tool_list_busiest(
    *, tenant_id: int, first_day: date, last_day: date, limit: int = BUSIEST_TOOLS
) -> list[ToolUse]:
    """The tenant's most called tools, most calls first (then by name), with their errors: the
    rolled-up days' ``ToolCallDay`` rows and the others' audit rows added up in one query
    (``core.audit.rollup.selectors.tool_use_list_busiest``)."""
    split = day_split_read(first_day=first_day, last_day=last_day)
    return tool_use_list_busiest(tenant_id=tenant_id, split=split, limit=limit)


def budget_list_with_spend(*, tenant_id: int, now: datetime) -> list[BudgetUse]:
    """The tenant's budgets (its own, then its people's) and what each current period has spent.

    Two queries: the budgets, then one aggregate of the month's counted records that sums the day
    and the month of the tenant and of each budgeted person at once.
    """
    budgets = list(
        LlmBudget.objects.filter(tenant_id=tenant_id)
        .select_related("user")
        .order_by("user__username", "period", "id")
    )
    if not budgets:
        return []
    day_start, _ = budget_period_bounds(period=BudgetPeriod.DAY, now=now)
    today = Q(created__gte=day_start)
    sums: dict[str, Any] = {}
    for budget in budgets:
        whose = _whose(budget)
        mine = None if budget.user_id is None else Q(user_id=budget.user_id)
        sums |= {
            f"{whose}_month_tokens": Sum("total_tokens", filter=mine),
            f"{whose}_month_cost": Sum("cost", filter=mine),
            f"{whose}_day_tokens": Sum("total_tokens", filter=mine & today if mine else today),
            f"{whose}_day_cost": Sum("cost", filter=mine & today if mine else today),
        }
    totals = budget_counted_records(tenant_id=tenant_id, now=now).aggregate(**sums)
    found = []
    for budget in budgets:
        key = f"{_whose(budget)}_{budget.period}"
        found.append(
            BudgetUse(
                period=budget.period,
                person=budget.user.username if budget.user else "",
                max_tokens=budget.max_tokens,
                tokens_spent=int(totals[f"{key}_tokens"] or 0),
                max_cost=None if budget.max_cost is None else float(budget.max_cost),
                cost_spent=float(round(totals[f"{key}_cost"] or Decimal(0), 6)),
                resets_at=budget_period_bounds(period=budget.period, now=now)[1],
            )
        )
    # The tenant's own budgets first: they are the ones that stop everybody.
    return sorted(found, key=lambda use: use.person != "")


def client_list_connected(*, tenant_id: int, now: datetime) -> list[ClientUse]:
    """The OAuth clients holding an unexpired access token for the tenant, most tokens first."""
    rows = (
        AccessToken.objects.filter(tenant_id=tenant_id, expires__gt=now, application__isnull=False)
        .values("application_id", "application__name")
        .annotate(tokens=Count("id"))
        .order_by("-tokens", "application__name", "application_id")
    )
    return [ClientUse(name=row["application__name"], live_tokens=row["tokens"]) for row in rows]


def session_count_live(*, tenant_id: int, now: datetime) -> int:
    """The tenant's MCP sessions neither ended nor idle past their lifetime."""
    idle_since = now - timedelta(seconds=gatehouse_settings.MCP_SESSION_IDLE_SECONDS)
    return McpSession.objects.filter(
        tenant_id=tenant_id, terminated_at__isnull=True, last_seen__gt=idle_since
    ).count()


def _whose(budget: LlmBudget) -> str:
    return "tenant" if budget.user_id is None else f"person{budget.user_id}"

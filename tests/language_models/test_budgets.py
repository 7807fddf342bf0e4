"""Budgets: a tenant's and a person's allowance per UTC day and month, summed from the usage records;
spent means refused until the period's reset, which the refusal names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from core.errors import BudgetExceeded
from language_models.governed.budgets import PENDING_COUNTS_SECONDS, budget_check, budget_period_bounds
from language_models.models import LlmBudget, LlmUsage, UsageOutcome

pytestmark = pytest.mark.django_db


def _spend(
    membership, *, tokens: int = 0, cost: str | None = None, user=None, created: datetime | None = None
):
    usage = LlmUsage.objects.create(
        tenant=membership.tenant,
        user=user if user is not None else membership.user,
        channel="api",
        provider="openai",
        model="gpt-4o-mini",
        total_tokens=tokens,
        prompt_tokens=tokens,
        cost=Decimal(cost) if cost is not None else None,
        outcome=UsageOutcome.OK,
    )
    if created is not None:
        LlmUsage.objects.filter(pk=usage.pk).update(created=created)
    return usage


def _next_midnight() -> str:
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    return f"{tomorrow.isoformat()}T00:00:00Z"


def _next_month() -> str:
    today = datetime.now(UTC).date()
    year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    return f"{year:04d}-{month:02d}-01T00:00:00Z"


def test_no_budget_means_no_limit(contributor):
    _spend(contributor, tokens=10**9)

    budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)


def test_a_tenant_budget_reached_mid_day_refuses_until_midnight(contributor, owner):
    LlmBudget.objects.create(tenant=contributor.tenant, period="day", max_tokens=1000)
    _spend(owner, tokens=600)
    budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)
    _spend(contributor, tokens=400)

    with pytest.raises(BudgetExceeded) as refused:
        budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)

    error = refused.value
    assert (error.api_code, error.http_status) == ("budget_exceeded", 429)
    assert error.data is not None
    assert {k: error.data[k] for k in ("budget", "period", "kind", "used", "limit", "resetsAt")} == {
        "budget": "tenant",
        "period": "day",
        "kind": "tokens",
        "used": 1000,
        "limit": 1000,
        "resetsAt": _next_midnight(),
    }
    assert 0 < error.retry_after_seconds <= 86_400
    assert error.data["retryAfterSeconds"] == error.retry_after_seconds
    assert _next_midnight() in error.message


def test_a_spent_day_passes_again_once_its_records_are_from_yesterday(contributor):
    LlmBudget.objects.create(tenant=contributor.tenant, period="day", max_tokens=1000)
    usage = _spend(contributor, tokens=5000)
    with pytest.raises(BudgetExceeded):
        budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)

    day_start, _ = budget_period_bounds(period="day", now=datetime.now(UTC))
    LlmUsage.objects.filter(pk=usage.pk).update(created=day_start - timedelta(seconds=1))

    budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)


def test_a_monthly_cost_budget_refuses_until_the_first_of_next_month(contributor):
    LlmBudget.objects.create(tenant=contributor.tenant, period="month", max_cost=Decimal("1.50"))
    month_start, _ = budget_period_bounds(period="month", now=datetime.now(UTC))
    _spend(contributor, cost="1.00", created=month_start)
    _spend(contributor, cost="0.50")
    _spend(contributor, cost="99", created=month_start - timedelta(seconds=1))

    with pytest.raises(BudgetExceeded) as refused:
        budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)

    assert refused.value.data is not None
    assert refused.value.data["kind"] == "cost"
    assert refused.value.data["used"] == pytest.approx(1.5)
    assert refused.value.data["resetsAt"] == _next_month()


def test_a_person_budget_refuses_that_person_only(contributor, owner):
    LlmBudget.objects.create(tenant=contributor.tenant, user=contributor.user, period="day", max_tokens=100)
    _spend(contributor, tokens=100)
    _spend(owner, tokens=10_000)

    with pytest.raises(BudgetExceeded) as refused:
        budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)
    budget_check(tenant_id=owner.tenant_id, user_id=owner.user_id)

    assert refused.value.data is not None
    assert refused.value.data["budget"] == "person"
    assert refused.value.data["used"] == 100


def test_the_refusal_names_the_budget_that_resets_last(contributor):
    LlmBudget.objects.create(tenant=contributor.tenant, period="day", max_tokens=10)
    LlmBudget.objects.create(tenant=contributor.tenant, period="month", max_tokens=10)
    _spend(contributor, tokens=10)

    with pytest.raises(BudgetExceeded) as refused:
        budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)

    assert refused.value.data is not None
    assert refused.value.data["period"] == "month"


def test_another_tenants_spending_counts_for_it_alone(contributor, outsider):
    LlmBudget.objects.create(tenant=contributor.tenant, period="day", max_tokens=10)
    _spend(outsider, tokens=10_000)

    budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)


def test_the_check_takes_two_queries_at_most(contributor, django_assert_max_num_queries):
    LlmBudget.objects.create(tenant=contributor.tenant, period="day", max_tokens=10_000)
    LlmBudget.objects.create(
        tenant=contributor.tenant, user=contributor.user, period="month", max_tokens=10_000
    )
    _spend(contributor, tokens=10)

    with django_assert_max_num_queries(2):
        budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)


@pytest.mark.parametrize(
    ("now", "period", "expected"),
    [
        (
            datetime(2026, 12, 31, 23, 59, tzinfo=UTC),
            "day",
            (datetime(2026, 12, 31, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),
        ),
        (
            datetime(2026, 12, 31, 23, 59, tzinfo=UTC),
            "month",
            (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),
        ),
        (
            datetime(2028, 2, 29, 12, tzinfo=UTC),
            "month",
            (datetime(2028, 2, 1, tzinfo=UTC), datetime(2028, 3, 1, tzinfo=UTC)),
        ),
    ],
)
def test_periods_are_utc_days_and_months(now, period, expected):
    assert budget_period_bounds(period=period, now=now) == expected


def test_a_reservation_counts_until_its_worker_is_presumed_dead(contributor):
    LlmBudget.objects.create(tenant=contributor.tenant, period="day", max_tokens=1000)
    pending = LlmUsage.objects.create(
        tenant=contributor.tenant,
        user=contributor.user,
        channel="mcp",
        provider="openai",
        model="m",
        total_tokens=1000,
        outcome=UsageOutcome.PENDING,
    )
    with pytest.raises(BudgetExceeded):
        budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)
    LlmUsage.objects.filter(pk=pending.pk).update(
        created=timezone.now() - timedelta(seconds=PENDING_COUNTS_SECONDS + 1)
    )
    budget_check(tenant_id=contributor.tenant_id, user_id=contributor.user_id)

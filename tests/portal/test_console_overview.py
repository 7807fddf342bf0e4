"""The console's overview: ``overview.json`` counts the tenant's own tool calls, errors, latency,
model spend, budgets, clients and sessions for the last 30 UTC days, for any member of the tenant
and nobody else, in the same number of queries whatever the number of rows; the page shows the same
numbers in tables, and loads its charts from files the CSP allows."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Role
from core.audit.retention import audit_purge
from core.audit.rollup.models import RolledUpDay
from core.audit.rollup.percentiles import percentile_interpolated
from core.audit.rollup.services import tool_call_days_roll_up
from core.models import AuditAction, AuditEvent, AuditOutcome
from language_models.models import BudgetPeriod, LlmUsage, UsageOutcome
from portal.console.pages import SIGN_IN_FIRST
from tests.support.factories import (
    AccessTokenFactory,
    AuditEventFactory,
    McpSessionFactory,
    MembershipFactory,
    TenantFactory,
    UserFactory,
)
from tests.support.llm_admin_support import LlmBudgetFactory, LlmUsageFactory

pytestmark = pytest.mark.django_db

# Session, person and memberships (3), then the data's 13 queries whatever the row count: 10
# aggregates, which days are rolled up (twice) and the rolled-up days' totals.
QUERY_BOUND = 16


@pytest.fixture
def ada(client, tenant):
    membership = MembershipFactory.create(
        user=UserFactory.create(username="ada"), tenant=tenant, role=Role.ADMIN
    )
    client.force_login(membership.user)
    return membership


@pytest.fixture
def stranger():
    return MembershipFactory.create(
        user=UserFactory.create(username="stranger"),
        tenant=TenantFactory.create(slug="elsewhere"),
        role=Role.ADMIN,
    )


def _noon(days_ago: int) -> datetime:
    """Noon UTC ``days_ago`` days before today: on that day whatever the time of the run."""
    return datetime.combine(
        timezone.now().astimezone(UTC).date() - timedelta(days=days_ago), time(12), tzinfo=UTC
    )


def _data(client, tenant):
    response = client.get(f"/console/{tenant.slug}/overview.json")
    assert response.status_code == 200
    return response.json()


def test_every_one_of_the_30_days_is_present_oldest_first_with_zeros(client, tenant, ada):
    data = _data(client, tenant)
    today = timezone.now().astimezone(UTC).date()
    assert [d["day"] for d in data["days"]] == [
        (today - timedelta(days=n)).isoformat() for n in range(29, -1, -1)
    ]
    assert data["days"][0] == {
        "day": data["firstDay"],
        "calls": 0,
        "errors": 0,
        "p50Ms": None,
        "p95Ms": None,
        "modelCalls": 0,
        "tokens": 0,
        "cost": 0.0,
    }


def test_it_counts_calls_errors_and_latency_per_day(client, tenant, ada):
    for duration in (10.0, 20.0, 30.0, 40.0):
        AuditEventFactory.create(membership=ada, created=_noon(1), duration_ms=duration, target="search")
    AuditEventFactory.create(
        membership=ada, created=_noon(1), outcome=AuditOutcome.ERROR, duration_ms=None, target="search"
    )
    AuditEventFactory.create(membership=ada, created=_noon(0), outcome=AuditOutcome.DENIED, target="whoami")
    data = _data(client, tenant)
    yesterday, today = data["days"][-2], data["days"][-1]
    # percentile_cont of 10, 20, 30, 40: 25 and 38.5 (the call without a duration is not timed).
    assert (yesterday["calls"], yesterday["errors"], yesterday["p50Ms"], yesterday["p95Ms"]) == (
        5,
        1,
        25.0,
        38.5,
    )
    assert (today["calls"], today["errors"]) == (1, 1)
    assert data["totals"]["calls"] == 6
    assert data["totals"]["errors"] == 2


def test_only_tool_calls_of_these_30_days_count(client, tenant, ada):
    AuditEventFactory.create(membership=ada, created=_noon(29))
    AuditEventFactory.create(membership=ada, created=_noon(30))
    AuditEventFactory.create(membership=ada, created=_noon(2), action=AuditAction.RESOURCE_READ)
    AuditEventFactory.create(membership=ada, created=_noon(2), action=AuditAction.LOGIN_FAILED)
    data = _data(client, tenant)
    assert data["days"][0]["calls"] == 1
    assert data["totals"]["calls"] == 1


def test_the_busiest_tools_are_the_ten_most_called_with_their_errors(client, tenant, ada):
    for n in range(12):
        for _ in range(n + 1):
            AuditEventFactory.create(membership=ada, created=_noon(3), target=f"tool-{n:02d}")
    AuditEventFactory.create(membership=ada, created=_noon(3), target="tool-11", outcome=AuditOutcome.ERROR)
    tools = _data(client, tenant)["tools"]
    assert [t["name"] for t in tools] == [f"tool-{n:02d}" for n in range(11, 1, -1)]
    assert tools[0] == {"name": "tool-11", "calls": 13, "errors": 1}


def test_another_tenants_rows_are_never_counted(client, tenant, ada, stranger):
    AuditEventFactory.create(membership=stranger, created=_noon(1), target="theirs")
    LlmUsageFactory.create(membership=stranger, total_tokens=500)
    McpSessionFactory.create(membership=stranger)
    AccessTokenFactory.create(membership=stranger)
    LlmBudgetFactory.create(tenant=stranger.tenant)
    data = _data(client, tenant)
    assert data["totals"] == {"calls": 0, "errors": 0, "liveSessions": 0, "connectedClients": 0}
    assert (data["tools"], data["budgets"], data["clients"]) == ([], [], [])
    assert sum(d["tokens"] for d in data["days"]) == 0


def test_model_tokens_and_cost_per_day_are_the_ended_calls(client, tenant, ada):
    LlmUsageFactory.create(membership=ada, total_tokens=100, cost=Decimal("0.25"))
    LlmUsageFactory.create(membership=ada, total_tokens=50, cost=Decimal("0.5"))
    LlmUsageFactory.create(membership=ada, total_tokens=999, outcome=UsageOutcome.PENDING)
    older = LlmUsageFactory.create(membership=ada, total_tokens=7, cost=Decimal("0.01"))
    LlmUsage.objects.filter(pk=older.pk).update(created=_noon(4))
    days = _data(client, tenant)["days"]
    assert (days[-1]["modelCalls"], days[-1]["tokens"], days[-1]["cost"]) == (2, 150, 0.75)
    assert (days[-5]["tokens"], days[-5]["cost"]) == (7, 0.01)


def test_each_budget_shows_what_its_period_spent_of_its_limit(client, tenant, ada):
    bea = MembershipFactory.create(user=UserFactory.create(username="bea"), tenant=tenant, role=Role.VIEWER)
    LlmBudgetFactory.create(tenant=tenant, period=BudgetPeriod.DAY, max_tokens=1000)
    LlmBudgetFactory.create(tenant=tenant, period=BudgetPeriod.MONTH, max_tokens=None, max_cost=Decimal("5"))
    LlmBudgetFactory.create(tenant=tenant, user=bea.user, period=BudgetPeriod.DAY, max_tokens=300)
    LlmUsageFactory.create(membership=ada, total_tokens=100, cost=Decimal("0.5"))
    LlmUsageFactory.create(membership=bea, total_tokens=40, cost=Decimal("0.25"))
    long_ago = LlmUsageFactory.create(membership=bea, total_tokens=9000, cost=Decimal("90"))
    LlmUsage.objects.filter(pk=long_ago.pk).update(created=_noon(40))
    budgets = _data(client, tenant)["budgets"]
    assert [(b["person"], b["period"], b["tokens"], b["cost"]) for b in budgets] == [
        (None, "day", {"spent": 140, "limit": 1000}, None),
        (None, "month", None, {"spent": 0.75, "limit": 5.0}),
        ("bea", "day", {"spent": 40, "limit": 300}, None),
    ]
    assert (
        budgets[0]["resetsAt"]
        == f"{(timezone.now().astimezone(UTC).date() + timedelta(days=1)).isoformat()}T00:00:00Z"
    )


def test_clients_are_those_with_live_tokens_and_sessions_those_not_ended_or_idle(client, tenant, ada):
    AccessTokenFactory.create(membership=ada, application__name="Claude")
    AccessTokenFactory.create(membership=ada, application__name="Cursor")
    AccessTokenFactory.create(
        membership=ada, application__name="Gone", expires=timezone.now() - timedelta(seconds=1)
    )
    McpSessionFactory.create(membership=ada)
    McpSessionFactory.create(membership=ada, terminated_at=timezone.now())
    McpSessionFactory.create(membership=ada, last_seen=timezone.now() - timedelta(days=30))
    data = _data(client, tenant)
    assert data["totals"]["connectedClients"] == 2
    assert sorted(c["name"] for c in data["clients"]) == ["Claude", "Cursor"]
    assert data["totals"]["liveSessions"] == 1


def test_a_viewer_may_read_it(client, tenant):
    viewer = MembershipFactory.create(
        user=UserFactory.create(username="vic"), tenant=tenant, role=Role.VIEWER
    )
    AuditEventFactory.create(membership=viewer, created=_noon(0))
    client.force_login(viewer.user)
    assert _data(client, tenant)["totals"]["calls"] == 1


@pytest.mark.parametrize("slug", ["elsewhere", "nobody", "x" * 300, "%00", "ac%E2%80%AEme", "..%2F"])
def test_another_tenant_or_a_hostile_slug_is_a_404(client, tenant, ada, stranger, slug):
    AuditEventFactory.create(membership=stranger, created=_noon(0))
    response = client.get(f"/console/{slug}/overview.json")
    assert response.status_code == 404
    assert b"calls" not in response.content


def test_another_tenants_data_is_refused_in_json(client, tenant, ada, stranger):
    response = client.get(f"/console/{stranger.tenant.slug}/overview.json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) == {"error"}


def test_signed_out_is_told_so_in_json(client, tenant):
    response = client.get(f"/console/{tenant.slug}/overview.json")
    assert response.status_code == 401
    assert response.json() == {"error": SIGN_IN_FIRST}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.parametrize("rolled_up", [False, True], ids=["live", "rolled-up"])
@pytest.mark.parametrize("path", ["overview.json", ""])
def test_the_number_of_queries_does_not_grow_with_the_rows(
    client, tenant, ada, django_assert_max_num_queries, path, rolled_up
):
    people = [MembershipFactory.create(tenant=tenant) for _ in range(3)]
    LlmBudgetFactory.create(tenant=tenant)
    LlmBudgetFactory.create(tenant=tenant, user=people[0].user)

    def rows(count: int, offset: int) -> None:
        for n in range(offset, offset + count):
            person = people[n % 3]
            AuditEventFactory.create(membership=person, created=_noon(n % 30), target=f"tool-{n % 40}")
        AccessTokenFactory.create(membership=people[offset % 3])
        McpSessionFactory.create(membership=people[offset % 3])
        LlmUsageFactory.create(membership=people[offset % 3])

    rows(10, 0)
    if rolled_up:
        tool_call_days_roll_up(now=_noon(0))
    with CaptureQueriesContext(connection) as few:
        client.get(f"/console/{tenant.slug}/{path}")
    rows(990, 10)
    if rolled_up:
        tool_call_days_roll_up(now=_noon(0))
    with django_assert_max_num_queries(QUERY_BOUND), CaptureQueriesContext(connection) as many:
        response = client.get(f"/console/{tenant.slug}/{path}")
    assert response.status_code == 200
    assert len(many) == len(few)


def _varied_calls(ada, stranger) -> None:
    """Calls over the 30 days and today: tools that tie, errors, refusals, calls without a duration,
    another tenant's, and other actions."""
    for days_ago in (0, 1, 2, 6, 29):
        for n, target in enumerate(("beta", "alpha", "Gamma", "alpha_2")):
            for k in range(n + days_ago % 3 + 1):
                AuditEventFactory.create(
                    membership=ada,
                    created=_noon(days_ago) + timedelta(minutes=7 * k),
                    target=target,
                    duration_ms=None if k == 2 else float(3 * k + n + days_ago),
                    outcome=(AuditOutcome.OK, AuditOutcome.ERROR, AuditOutcome.DENIED)[(k + n) % 3],
                )
        AuditEventFactory.create(membership=stranger, created=_noon(days_ago), target="theirs")
        AuditEventFactory.create(membership=ada, created=_noon(days_ago), action=AuditAction.RESOURCE_READ)


def test_rolled_up_days_answer_as_aggregating_every_day_live_does(client, tenant, ada, stranger):
    _varied_calls(ada, stranger)
    live = _data(client, tenant)
    tool_call_days_roll_up(now=_noon(0))
    assert _data(client, tenant) == live


def test_the_busiest_tools_add_todays_calls_to_the_rolled_up_days(client, tenant, ada):
    AuditEventFactory.create_batch(3, membership=ada, created=_noon(1), target="beta")
    AuditEventFactory.create_batch(5, membership=ada, created=_noon(1), target="alpha")
    tool_call_days_roll_up(now=_noon(0))
    AuditEventFactory.create_batch(2, membership=ada, created=_noon(0), target="beta")
    AuditEventFactory.create_batch(4, membership=ada, created=_noon(0), target="gamma")
    tools = _data(client, tenant)["tools"]
    assert [(t["name"], t["calls"]) for t in tools] == [("alpha", 5), ("beta", 5), ("gamma", 4)]


def test_rolled_up_days_keep_their_figures_after_their_audit_rows_are_purged(client, tenant, ada):
    AuditEventFactory.create_batch(2, membership=ada, created=_noon(3), target="search")
    tool_call_days_roll_up(now=_noon(0))
    audit_purge(before=_noon(1))
    data = _data(client, tenant)
    assert (data["days"][-4]["calls"], data["tools"]) == (2, [{"name": "search", "calls": 2, "errors": 0}])


def test_a_day_missing_from_the_rollup_is_aggregated_live(client, tenant, ada, stranger):
    _varied_calls(ada, stranger)
    tool_call_days_roll_up(now=_noon(0))
    RolledUpDay.objects.filter(day=_noon(2).date()).delete()
    AuditEvent.objects.filter(created__date=_noon(2).date(), target="beta").delete()
    with_gap = _data(client, tenant)
    RolledUpDay.objects.all().delete()
    assert with_gap == _data(client, tenant)


def test_the_page_shows_the_figures_and_a_table_beside_every_chart(client, tenant, ada):
    AuditEventFactory.create(membership=ada, created=_noon(0), target="search_papers")
    page = client.get(f"/console/{tenant.slug}/").content.decode()
    for chart, table in (
        ("chart-calls", "table-calls"),
        ("chart-tools", "table-tools"),
        ("chart-models", "table-models"),
    ):
        assert f'<canvas id="{chart}"' in page
        assert f'id="{table}"' in page
    assert '<p class="figure" id="figure-calls"><strong>1</strong> tool calls</p>' in page
    assert "search_papers" in page
    assert 'data-url="/console/acme-test/overview.json"' in page


def test_the_charts_come_from_script_files_not_inline_scripts(client, tenant, ada):
    page = client.get(f"/console/{tenant.slug}/").content.decode()
    assert page.count("<script") == 2
    assert '<script src="/static/vendor/chartjs/chart.umd.min.js"' in page
    assert '<script src="/static/console/overview.js"' in page


def test_a_budget_is_a_bar_of_spent_against_its_limit(client, tenant, ada):
    LlmBudgetFactory.create(tenant=tenant, period=BudgetPeriod.DAY, max_tokens=1000)
    LlmUsageFactory.create(membership=ada, total_tokens=250)
    page = client.get(f"/console/{tenant.slug}/").content.decode()
    assert "250 of 1000 tokens" in page
    assert '<meter min="0" max="1000" high="1000" value="250">' in page


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([], 0.5, None),
        ([7.0], 0.95, 7.0),
        ([10.0, 20.0, 30.0, 40.0], 0.5, 25.0),
        ([10.0, 20.0, 30.0, 40.0], 0.95, 38.5),
    ],
)
def test_the_portable_percentile_interpolates_as_percentile_cont(values, fraction, expected):
    assert percentile_interpolated(values, fraction) == expected

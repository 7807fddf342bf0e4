"""The operators' dashboard on the admin's index and ``/admin/dashboard.json``: shown to staff who
may view the audit trail and refused to everyone else, summing every tenant's tool calls, latency,
busiest tools and tenants and model spend for the last 30 UTC days, in the same number of queries
however many tenants there are."""

from __future__ import annotations

from datetime import UTC, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.audit.rollup.services import tool_call_days_roll_up
from core.models import AuditAction, AuditOutcome
from language_models.models import UsageOutcome
from portal.operator.views import NOT_PERMITTED
from tests.portal.operator.conftest import noon
from tests.support.factories import AuditEventFactory, MembershipFactory, TenantFactory
from tests.support.llm_admin_support import LlmUsageFactory

pytestmark = pytest.mark.django_db

DATA_URL = "/admin/dashboard.json"
# The session and the person, which days are rolled up, then fifteen aggregates (traffic with
# rolled-up and live parts, the tenants' names, and health) whatever the row count.
QUERY_BOUND = 18


def _data(client) -> dict:
    response = client.get(DATA_URL)
    assert response.status_code == 200
    return response.json()


def _tenant(slug: str):
    return MembershipFactory.create(tenant=TenantFactory.create(slug=slug, name=slug.title()))


def _traffic(membership, *, calls: int, errors: int = 0, days_ago: int = 1, target: str = "search") -> None:
    for n in range(calls):
        outcome = AuditOutcome.ERROR if n < errors else AuditOutcome.OK
        AuditEventFactory.create(
            membership=membership,
            created=noon(days_ago),
            target=target,
            outcome=outcome,
            duration_ms=10.0 * (n + 1),
        )


def _spend(membership, *, cost: str, tokens: int = 100, days_ago: int = 1, **fields) -> None:
    usage = LlmUsageFactory.create(membership=membership, total_tokens=tokens, cost=Decimal(cost), **fields)
    # created is auto_now_add: set afterwards, as the day under test.
    type(usage).objects.filter(pk=usage.pk).update(created=noon(days_ago))


# Who sees it


def test_a_superuser_sees_the_dashboard_above_the_admin_s_index(client, operator):
    response = client.get("/admin/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="operator-dashboard"' in page
    assert page.index('id="operator-dashboard"') < page.index('id="content-main"')


def test_staff_who_may_view_the_audit_trail_see_the_dashboard(client, auditor):
    assert 'id="operator-dashboard"' in client.get("/admin/").content.decode()
    assert client.get(DATA_URL).status_code == 200


def test_other_staff_see_the_index_without_the_dashboard(client, clerk):
    response = client.get("/admin/")
    assert response.status_code == 200
    assert 'id="operator-dashboard"' not in response.content.decode()
    assert 'id="content-main"' in response.content.decode()


def test_other_staff_are_refused_the_data_with_a_403_in_json(client, clerk):
    response = client.get(DATA_URL, headers={"accept": "application/json"})
    assert response.status_code == 403
    assert response.json()["error_description"] == NOT_PERMITTED


def test_a_member_who_is_not_staff_is_refused_the_data(client, member):
    assert client.get(DATA_URL).status_code == 403


def test_someone_signed_out_is_sent_to_the_admin_s_sign_in(client, db):
    response = client.get(DATA_URL)
    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={DATA_URL}"


def test_the_data_is_never_cached(client, operator):
    assert "no-store" in client.get(DATA_URL)["Cache-Control"]


def test_the_data_answers_only_get(client, operator):
    assert client.post(DATA_URL).status_code == 405


def test_the_page_loads_chart_js_and_its_script_from_files_with_no_inline_script(client, operator):
    page = client.get("/admin/").content.decode()
    assert "/static/vendor/chartjs/chart.umd.min.js" in page
    assert "/static/portal/operator-dashboard.js" in page
    assert 'data-url="/admin/dashboard.json"' in page
    assert "<script>" not in page


# The numbers


def test_every_one_of_the_30_days_is_present_oldest_first_with_zeros(client, operator):
    data = _data(client)
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


def test_it_sums_the_calls_errors_and_latency_of_two_tenants_per_day(client, operator):
    _traffic(_tenant("north"), calls=2, errors=1)  # 10 and 20 ms
    _traffic(_tenant("south"), calls=2)  # 10 and 20 ms
    data = _data(client)
    yesterday = data["days"][-2]
    # percentile_cont of 10, 10, 20, 20: 15 and 20.
    assert (yesterday["calls"], yesterday["errors"], yesterday["p50Ms"], yesterday["p95Ms"]) == (
        4,
        1,
        15.0,
        20.0,
    )
    assert (data["totals"]["calls"], data["totals"]["errors"]) == (4, 1)


def test_only_tool_calls_of_these_30_days_count(client, operator):
    north = _tenant("north")
    _traffic(north, calls=1, days_ago=29)
    _traffic(north, calls=1, days_ago=30)
    AuditEventFactory.create(membership=north, created=noon(2), action=AuditAction.LOGIN_FAILED)
    assert _data(client)["totals"]["calls"] == 1


def test_a_tool_served_in_two_tenants_is_one_of_the_busiest_with_their_calls_summed(client, operator):
    _traffic(_tenant("north"), calls=3, errors=1, target="search")
    _traffic(_tenant("south"), calls=2, target="search")
    _traffic(_tenant("west"), calls=4, target="fetch")
    assert _data(client)["tools"] == [
        {"name": "search", "calls": 5, "errors": 1},
        {"name": "fetch", "calls": 4, "errors": 0},
    ]


def test_the_busiest_tenants_are_ordered_by_tool_calls_with_their_model_spend(client, operator):
    north, south = _tenant("north"), _tenant("south")
    _traffic(north, calls=1)
    _traffic(south, calls=3, errors=2)
    _spend(north, cost="0.25", tokens=40)
    _spend(_tenant("quiet"), cost="1.5", tokens=7)
    tenants = _data(client)["tenants"]
    assert [(t["slug"], t["calls"], t["errors"], t["tokens"], t["cost"]) for t in tenants] == [
        ("south", 3, 2, 0, 0.0),
        ("north", 1, 0, 40, 0.25),
        ("quiet", 0, 0, 7, 1.5),
    ]


def test_model_spend_per_day_sums_every_tenant_s_ended_calls(client, operator):
    _spend(_tenant("north"), cost="0.25", tokens=100)
    _spend(_tenant("south"), cost="0.5", tokens=50)
    _spend(_tenant("west"), cost="9", tokens=999, outcome=UsageOutcome.PENDING)
    data = _data(client)
    yesterday = data["days"][-2]
    assert (yesterday["modelCalls"], yesterday["tokens"], yesterday["cost"]) == (2, 150, 0.75)
    assert data["totals"]["cost"] == 0.75


def test_the_page_shows_the_same_numbers_in_its_tables(client, operator):
    _traffic(_tenant("north"), calls=3, errors=1, target="search-north")
    page = client.get("/admin/").content.decode()
    assert '<p class="figure" id="figure-calls"><strong>3</strong> tool calls</p>' in page
    assert '<td data-label="Tool" class="wrap">search-north</td>' in page
    assert '<td data-label="Tenant" class="wrap" title="North">north</td>' in page


def test_a_tenant_s_name_is_escaped_in_the_page(client, operator):
    hostile = MembershipFactory.create(
        tenant=TenantFactory.create(slug="hostile", name='<img src=x onerror="x()">')
    )
    _traffic(hostile, calls=1, target="<script>alert(1)</script>")
    page = client.get("/admin/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '<img src=x onerror="x()">' not in page


# Queries


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def _populate(tenants: int) -> None:
    for n in range(tenants):
        membership = _tenant(f"tenant-{n:02d}")
        _traffic(membership, calls=2, errors=1, target=f"tool-{n}")
        _spend(membership, cost="0.1")


@pytest.mark.parametrize("url", [DATA_URL, "/admin/"])
def test_the_number_of_queries_does_not_grow_with_the_number_of_tenants(client, operator, url):
    _populate(2)
    few = _queries(client, url)
    _populate(15)
    assert _queries(client, url) == few


def test_the_data_takes_a_fixed_number_of_queries(client, operator, django_assert_max_num_queries):
    _populate(3)
    with django_assert_max_num_queries(QUERY_BOUND):
        assert client.get(DATA_URL).status_code == 200


def test_the_data_takes_a_fixed_number_of_queries_with_the_finished_days_rolled_up(
    client, operator, django_assert_max_num_queries
):
    _populate(3)
    tool_call_days_roll_up(now=timezone.now())
    with django_assert_max_num_queries(QUERY_BOUND):
        assert client.get(DATA_URL).status_code == 200


@pytest.mark.parametrize("url", [DATA_URL, "/admin/"])
def test_no_query_runs_twice_in_one_request(client, operator, url):
    _populate(3)
    tool_call_days_roll_up(now=timezone.now())
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    statements = [query["sql"] for query in queries.captured_queries]
    assert len(statements) == len(set(statements))

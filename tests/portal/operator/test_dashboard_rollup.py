"""The dashboard's traffic read from the daily rollup for the finished days it holds and live for
the others answers exactly what it answers with every day aggregated live: two tenants and calls of
no tenant over several days and today, tools and tenants that tie, a tenant deleted after its days
were rolled up; and a rolled-up day keeps its figures after its audit rows are purged."""

from __future__ import annotations

from datetime import UTC, datetime, time
from decimal import Decimal

import pytest
from django.utils import timezone

from core.audit.retention import audit_purge
from core.audit.rollup.models import RolledUpDay
from core.audit.rollup.services import tool_call_days_roll_up
from core.models import AuditOutcome
from tests.portal.operator.conftest import noon
from tests.support.factories import AuditEventFactory, MembershipFactory, TenantFactory
from tests.support.llm_admin_support import LlmUsageFactory

pytestmark = pytest.mark.django_db

DATA_URL = "/admin/dashboard.json"


def _traffic(client) -> dict:
    """The JSON's traffic: all of it but the health, which says when it was read."""
    response = client.get(DATA_URL)
    assert response.status_code == 200
    return {key: value for key, value in response.json().items() if key != "health"}


def _tenant(slug: str):
    return MembershipFactory.create(tenant=TenantFactory.create(slug=slug, name=slug.title()))


def _calls(
    membership, *, days_ago: int, target: str, durations: list[float | None], errors: int = 0, **fields
) -> None:
    for n, duration in enumerate(durations):
        AuditEventFactory.create(
            membership=membership,
            created=noon(days_ago),
            target=target,
            duration_ms=duration,
            outcome=AuditOutcome.ERROR if n < errors else AuditOutcome.OK,
            **fields,
        )


def _spend(membership, *, cost: str, days_ago: int) -> None:
    usage = LlmUsageFactory.create(membership=membership, total_tokens=10, cost=Decimal(cost))
    type(usage).objects.filter(pk=usage.pk).update(created=noon(days_ago))


def _every_day_live() -> None:
    RolledUpDay.objects.all().delete()


@pytest.fixture
def varied_traffic():
    """Three tenants and calls of none over five finished days and today. Twelve tools, so the ten
    busiest cut through a tie; north and south tie on calls and cost (slug decides); west is
    deleted once its days are rolled up, its audit rows staying with no tenant."""
    north, south, west = _tenant("north"), _tenant("south"), _tenant("west")
    for days_ago in (0, 1, 2, 4, 6):
        _calls(north, days_ago=days_ago, target="search", durations=[12.5, 40.0, 7.25, None], errors=1)
        _calls(south, days_ago=days_ago, target="Search", durations=[3.0, 99.0, 1000.0])
        _calls(south, days_ago=days_ago, target="fetch", durations=[None, 5.0])
        _calls(west, days_ago=days_ago, target="fetch", durations=[8.0], errors=1)
    _calls(north, days_ago=2, target="alpha", durations=[1.0, 2.0])
    _calls(south, days_ago=4, target="beta", durations=[1.0, 2.0])
    for n in range(8):
        _calls(north if n % 2 else south, days_ago=n % 3, target=f"tool-{n}", durations=[float(n + 1)])
    _calls(north, days_ago=1, target="orphan", durations=[500.0, 501.0], tenant=None)
    # north: 5 * 4 + 2 + 4 = 26 calls, south: 5 * 5 + 2 + 4 = 31; five more level them.
    _calls(north, days_ago=6, target="level", durations=[None] * 5)
    _spend(north, cost="0.5", days_ago=2)
    _spend(south, cost="0.5", days_ago=0)
    return west


def test_rolled_up_and_live_days_answer_as_every_day_aggregated_live(client, operator, varied_traffic):
    assert tool_call_days_roll_up(now=timezone.now())
    varied_traffic.tenant.delete()
    rolled = _traffic(client)
    _every_day_live()
    assert rolled == _traffic(client)


def test_the_varied_traffic_exercises_the_ties_it_is_meant_to(client, operator, varied_traffic):
    # Guards the test above: without these ties it would compare answers that cannot differ.
    data = _traffic(client)
    tenants = [(t["slug"], t["calls"], t["cost"]) for t in data["tenants"]]
    assert tenants[:2] == [("north", 31, 0.5), ("south", 31, 0.5)]
    # Ten of twelve tools shown: the cut falls among the eight with one call.
    assert [t["calls"] for t in data["tools"]] == [20, 15, 15, 5, 2, 2, 2, 1, 1, 1]


def test_a_rolled_up_day_keeps_its_figures_after_its_audit_rows_are_purged(client, operator, varied_traffic):
    tool_call_days_roll_up(now=timezone.now())
    before = _traffic(client)
    audit_purge(before=datetime.combine(timezone.now().astimezone(UTC).date(), time.min, tzinfo=UTC))
    after = _traffic(client)
    assert (after["days"][:-1], after["totals"]["calls"]) == (before["days"][:-1], before["totals"]["calls"])

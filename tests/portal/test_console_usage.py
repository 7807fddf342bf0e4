"""The console's usage and audit section: the tenant's own audit rows, filtered by person, tool,
action, outcome and UTC days, newest first, 50 a page through a keyset cursor; ``usage.csv`` holds
exactly the filtered rows; hostile filter values are the page's own message, never a 500; and the
page takes the same number of queries with 10 rows as with 500."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, time, timedelta

import pytest
from django.utils import timezone

from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.parameter_guard import PARAMETER_HAS_NUL
from portal.console import usage
from portal.console.usage_selectors import USAGE_PAGE_ROWS
from tests.support.factories import AuditEventFactory

pytestmark = pytest.mark.django_db

# Session, person and memberships (3), then the page's rows, the rows per day and the people suggested.
QUERY_BOUND = 6


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner.user)
    return owner


def _noon(days_ago: int) -> datetime:
    return datetime.combine(
        timezone.now().astimezone(UTC).date() - timedelta(days=days_ago), time(12), tzinfo=UTC
    )


def _events(membership, count: int, *, days_ago: int = 0, **fields) -> list[AuditEvent]:
    """``count`` rows a second apart, the newest at noon ``days_ago`` days ago."""
    start = _noon(days_ago)
    return AuditEvent.objects.bulk_create(
        AuditEventFactory.build(membership=membership, created=start - timedelta(seconds=n), **fields)
        for n in range(count)
    )


def _page(client, tenant, **query):
    return client.get(f"/console/{tenant.slug}/usage/", query)


def _shown_ids(response) -> list[int]:
    return [event.pk for event in response.context["page"].events]


def _csv(client, tenant, **query) -> list[dict[str, str]]:
    response = client.get(f"/console/{tenant.slug}/usage.csv", query)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="audit-acme-test-')
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_the_page_lists_the_tenants_rows_newest_first(client, tenant, signed_in):
    older = _events(signed_in, 1, days_ago=1)
    newer = _events(signed_in, 1, days_ago=0)
    response = _page(client, tenant)
    assert response.status_code == 200
    assert _shown_ids(response) == [newer[0].pk, older[0].pk]


def test_a_viewer_sees_the_page_too(client, tenant, member):
    _events(member, 2)
    client.force_login(member.user)
    response = _page(client, tenant)
    assert response.status_code == 200
    assert len(_shown_ids(response)) == 2


def test_another_tenants_rows_never_appear(client, tenant, signed_in, outsider):
    mine = _events(signed_in, 2)
    _events(outsider, 3)
    assert sorted(_shown_ids(_page(client, tenant))) == sorted(e.pk for e in mine)
    assert len(_csv(client, tenant)) == 2


def test_an_outsider_cannot_reach_the_tenants_usage(client, tenant, owner, outsider):
    client.force_login(outsider.user)
    assert _page(client, tenant).status_code == 404
    assert client.get(f"/console/{tenant.slug}/usage.csv").status_code == 404


def test_the_filters_match_person_tool_action_and_outcome(client, tenant, signed_in, member):
    wanted = _events(signed_in, 2, target="search", outcome=AuditOutcome.ERROR)
    _events(member, 2, target="search", outcome=AuditOutcome.ERROR)
    _events(signed_in, 2, target="whoami", outcome=AuditOutcome.ERROR)
    _events(signed_in, 2, target="search", outcome=AuditOutcome.OK)
    _events(signed_in, 2, target="search", outcome=AuditOutcome.ERROR, action=AuditAction.RESOURCE_READ)
    query = {"person": "owner", "tool": "search", "action": AuditAction.TOOL_CALLED, "outcome": "error"}
    assert _shown_ids(_page(client, tenant, **query)) == [e.pk for e in wanted]


def test_the_range_defaults_to_the_last_7_days(client, tenant, signed_in):
    inside = _events(signed_in, 1, days_ago=6)
    _events(signed_in, 1, days_ago=7)
    response = _page(client, tenant)
    assert _shown_ids(response) == [inside[0].pk]
    assert len(response.context["days"]) == 7


def test_the_range_is_the_days_chosen(client, tenant, signed_in):
    _events(signed_in, 1, days_ago=1)
    wanted = _events(signed_in, 2, days_ago=10)
    _events(signed_in, 1, days_ago=11)
    day = _noon(10).date().isoformat()
    response = _page(client, tenant, **{"from": day, "to": day})
    assert _shown_ids(response) == [e.pk for e in wanted]
    assert [(d.day.isoformat(), d.events) for d in response.context["days"]] == [(day, 2)]


def test_the_rows_per_day_count_failed_and_refused_rows(client, tenant, signed_in):
    _events(signed_in, 3, days_ago=2)
    _events(signed_in, 1, days_ago=2, outcome=AuditOutcome.DENIED)
    _events(signed_in, 1, days_ago=0, outcome=AuditOutcome.ERROR)
    days = {d.day: (d.events, d.failed) for d in _page(client, tenant).context["days"]}
    assert days[_noon(2).date()] == (4, 1)
    assert days[_noon(0).date()] == (1, 1)
    assert days[_noon(1).date()] == (0, 0)


def test_the_cursor_pages_through_every_row_once(client, tenant, signed_in):
    # Three rows share one instant, on the page boundary, so ties are ordered by id.
    events = _events(signed_in, USAGE_PAGE_ROWS + 7)
    AuditEvent.objects.filter(
        pk__in=[e.pk for e in events[USAGE_PAGE_ROWS - 2 : USAGE_PAGE_ROWS + 1]]
    ).update(created=events[USAGE_PAGE_ROWS - 2].created)
    first = _page(client, tenant)
    cursor = first.context["page"].next_cursor
    assert len(_shown_ids(first)) == USAGE_PAGE_ROWS
    second = _page(client, tenant, before=cursor.encoded())
    assert len(_shown_ids(second)) == 7
    assert second.context["page"].next_cursor is None
    assert sorted(_shown_ids(first) + _shown_ids(second)) == sorted(e.pk for e in events)
    assert b"Older rows" in first.content


def test_the_page_never_uses_offset(client, tenant, signed_in, django_assert_max_num_queries):
    _events(signed_in, USAGE_PAGE_ROWS + 1)
    cursor = _page(client, tenant).context["page"].next_cursor
    with django_assert_max_num_queries(QUERY_BOUND) as captured:
        _page(client, tenant, before=cursor.encoded())
    rows_query = next(
        q["sql"] for q in captured.captured_queries if f"LIMIT {USAGE_PAGE_ROWS + 1}" in q["sql"]
    )
    assert "OFFSET" not in rows_query


def test_the_csv_holds_exactly_the_filtered_rows_of_every_page(client, tenant, signed_in, member):
    wanted = _events(signed_in, USAGE_PAGE_ROWS + 5, target="=cmd")
    _events(signed_in, 3, target="other")
    _events(member, 3, target="=cmd")
    rows = _csv(client, tenant, person="owner", tool="=cmd")
    assert [row["created"] for row in rows] == [e.created.isoformat() for e in wanted]
    assert {(row["username"], row["target"], row["tenant"]) for row in rows} == {
        ("owner", "'=cmd", "acme-test")
    }


def test_the_csv_refuses_more_rows_than_its_bound(client, tenant, signed_in, monkeypatch):
    monkeypatch.setattr(usage, "CSV_MAX_ROWS", 3)
    _events(signed_in, 4)
    response = client.get(f"/console/{tenant.slug}/usage.csv")
    assert response.status_code == 400
    assert response.context["error"] == usage.CSV_TOO_MANY.format(limit=3)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"person": "ow\x00ner"}, PARAMETER_HAS_NUL.format(name="'person'")),
        ({"tool": "who\u202eami"}, usage.INVISIBLE.format(label="Tool or target", code="U+202E")),
        ({"person": "x" * 5000}, usage.TOO_LONG.format(label="Person", limit=150)),
        ({"tool": "x" * 5000}, usage.TOO_LONG.format(label="Tool or target", limit=500)),
        ({"from": "2025-02-30"}, usage.NOT_A_DATE.format(label="From")),
        ({"to": "yesterday"}, usage.NOT_A_DATE.format(label="To")),
        (
            {"from": "2025-03-02", "to": "2025-03-01"},
            usage.TO_BEFORE_FROM.format(first="2025-03-02", last="2025-03-01"),
        ),
        ({"from": "2024-01-01", "to": "2025-01-01"}, usage.RANGE_TOO_LONG.format(days=367, limit=366)),
        ({"outcome": "maybe"}, usage.UNKNOWN_CHOICE.format(label="Outcome", value="maybe")),
        ({"action": "x" * 5000}, usage.UNKNOWN_CHOICE.format(label="Action", value="x" * 60)),
        ({"before": "not-a-cursor"}, usage.BAD_CURSOR),
        ({"before": "2025-01-01T00:00:00|1"}, usage.BAD_CURSOR),
        ({"before": "2025-01-01T00:00:00+00:00|99999999999999999999"}, usage.BAD_CURSOR),
    ],
)
def test_a_hostile_filter_is_the_pages_own_message(client, tenant, signed_in, query, message):
    response = _page(client, tenant, **query)
    assert response.status_code == 400
    assert response.context["error"] == message
    assert b'id="usage-error"' in response.content


def test_a_hostile_filter_is_refused_by_the_csv_too(client, tenant, signed_in):
    response = client.get(f"/console/{tenant.slug}/usage.csv", {"to": "2025-13-01"})
    assert response.status_code == 400
    assert response.context["error"] == usage.NOT_A_DATE.format(label="To")


def test_the_filters_suggest_the_tenants_people_and_the_tools_served(
    client, tenant, signed_in, member, outsider
):
    suggestions = _page(client, tenant).context["suggestions"]
    assert suggestions.people == sorted([signed_in.user.username, member.user.username])
    assert outsider.user.username not in suggestions.people
    assert "whoami" in suggestions.tools
    assert suggestions.tools == sorted(suggestions.tools)


def test_the_range_of_366_days_is_allowed(client, tenant, signed_in):
    assert _page(client, tenant, **{"from": "2024-01-01", "to": "2024-12-31"}).status_code == 200


@pytest.mark.parametrize("rows", [10, 500])
def test_the_page_takes_a_bounded_number_of_queries(
    client, tenant, signed_in, django_assert_max_num_queries, rows
):
    _events(signed_in, rows)
    with django_assert_max_num_queries(QUERY_BOUND):
        response = _page(client, tenant)
    assert len(_shown_ids(response)) == min(rows, USAGE_PAGE_ROWS)


def test_the_page_loads_its_chart_from_static_files(client, tenant, signed_in):
    _events(signed_in, 1)
    content = _page(client, tenant).content.decode()
    assert "console/usage.js" in content
    assert 'id="table-days"' in content
    assert "<script>" not in content

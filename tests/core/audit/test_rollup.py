"""The daily rollup of tool calls: each finished, settled UTC day of the window becomes a row per
tenant and tool and one per tenant with its percentiles, and the same over every tenant at once
(calls of no tenant included); a day that receives rows late is rolled up again, one whose rows
were purged is not; runs at once roll each day up once."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, time, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from core.audit.retention import audit_purge
from core.audit.rollup.models import (
    AllTenantsToolCallDay,
    AllTenantsToolCallDayTotal,
    RolledUpDay,
    ToolCallDay,
    ToolCallDayTotal,
)
from core.audit.rollup.services import ROLLUP_DAYS, ROLLUP_SETTLE, tool_call_days_roll_up
from core.models import AuditAction, AuditOutcome
from jobs.management.commands.jobs_worker import _roll_up_forever
from tests.support.factories import AuditEventFactory, MembershipFactory, TenantFactory

pytestmark = pytest.mark.django_db


def _today() -> date:
    return timezone.now().astimezone(UTC).date()


def _noon(days_ago: int) -> datetime:
    """Noon UTC ``days_ago`` days before today: on that day whatever the time of the run."""
    return datetime.combine(_today() - timedelta(days=days_ago), time(12), tzinfo=UTC)


def _tools(day: datetime) -> list[tuple[str, int, int]]:
    rows = ToolCallDay.objects.filter(day=day.date()).values_list("tool", "calls", "errors")
    return sorted(rows)


@pytest.fixture
def ada(tenant):
    return MembershipFactory.create(tenant=tenant)


def test_a_finished_day_becomes_a_row_per_tool_with_its_calls_and_errors(ada):
    AuditEventFactory.create_batch(3, membership=ada, created=_noon(1), target="search")
    AuditEventFactory.create(membership=ada, created=_noon(1), target="whoami", outcome=AuditOutcome.ERROR)
    AuditEventFactory.create(membership=ada, created=_noon(1), target="whoami", outcome=AuditOutcome.DENIED)
    tool_call_days_roll_up(now=_noon(0))
    assert _tools(_noon(1)) == [("search", 3, 0), ("whoami", 2, 2)]


def test_the_tenants_day_keeps_its_calls_and_the_percentiles_of_the_timed_ones(ada, tenant):
    for duration in (10.0, 20.0, 30.0, 40.0):
        AuditEventFactory.create(membership=ada, created=_noon(1), duration_ms=duration)
    AuditEventFactory.create(membership=ada, created=_noon(1), duration_ms=None, outcome=AuditOutcome.ERROR)
    tool_call_days_roll_up(now=_noon(0))
    total = ToolCallDayTotal.objects.get(day=_noon(1).date())
    assert (total.tenant_id, total.calls, total.errors, total.timed_calls, total.p50_ms, total.p95_ms) == (
        tenant.pk,
        5,
        1,
        4,
        25.0,
        pytest.approx(38.5),
    )


def test_each_tenant_has_its_own_rows(ada):
    other = MembershipFactory.create(tenant=TenantFactory.create(slug="elsewhere"))
    AuditEventFactory.create(membership=ada, created=_noon(2), target="mine")
    AuditEventFactory.create_batch(2, membership=other, created=_noon(2), target="theirs")
    tool_call_days_roll_up(now=_noon(0))
    rows = ToolCallDay.objects.filter(day=_noon(2).date()).values_list("tenant__slug", "tool", "calls")
    assert sorted(rows) == [("acme-test", "mine", 1), ("elsewhere", "theirs", 2)]


def test_only_tool_calls_are_rolled_up(ada):
    AuditEventFactory.create(membership=ada, created=_noon(1), action=AuditAction.RESOURCE_READ)
    AuditEventFactory.create(membership=ada, created=_noon(1), action=AuditAction.LOGIN_FAILED)
    tool_call_days_roll_up(now=_noon(0))
    assert (ToolCallDay.objects.count(), RolledUpDay.objects.get(day=_noon(1).date()).calls) == (0, 0)


def test_every_finished_day_of_the_window_is_marked_rolled_up_even_without_calls():
    rolled = tool_call_days_roll_up(now=_noon(0))
    expected = [_today() - timedelta(days=n) for n in range(ROLLUP_DAYS, 0, -1)]
    assert (rolled, list(RolledUpDay.objects.values_list("day", flat=True))) == (expected, expected)


def test_today_is_never_rolled_up(ada):
    AuditEventFactory.create(membership=ada, created=_noon(0))
    tool_call_days_roll_up(now=_noon(0) + timedelta(hours=11))
    assert ToolCallDay.objects.filter(day=_today()).exists() is False


def test_a_day_waits_until_it_has_been_over_for_the_settle_time(ada):
    midnight = datetime.combine(_today(), time.min, tzinfo=UTC)
    tool_call_days_roll_up(now=midnight + ROLLUP_SETTLE - timedelta(seconds=1))
    assert RolledUpDay.objects.filter(day=_today() - timedelta(days=1)).exists() is False


def test_a_settled_day_is_rolled_up(ada):
    midnight = datetime.combine(_today(), time.min, tzinfo=UTC)
    tool_call_days_roll_up(now=midnight + ROLLUP_SETTLE)
    assert RolledUpDay.objects.filter(day=_today() - timedelta(days=1)).exists() is True


def test_a_second_run_finds_nothing_to_do(ada):
    AuditEventFactory.create(membership=ada, created=_noon(4))
    tool_call_days_roll_up(now=_noon(0))
    assert tool_call_days_roll_up(now=_noon(0)) == []


def test_a_row_stored_late_rolls_its_day_up_again(ada):
    AuditEventFactory.create(membership=ada, created=_noon(3), target="search")
    tool_call_days_roll_up(now=_noon(0))
    # As the spool replays it: stored now, with the time of its call.
    AuditEventFactory.create(membership=ada, created=_noon(3), target="search", outcome=AuditOutcome.ERROR)
    assert tool_call_days_roll_up(now=_noon(0)) == [_noon(3).date()]
    assert _tools(_noon(3)) == [("search", 2, 1)]


def test_a_late_rows_day_total_is_counted_again_too(ada):
    AuditEventFactory.create(membership=ada, created=_noon(3), duration_ms=10.0)
    tool_call_days_roll_up(now=_noon(0))
    AuditEventFactory.create(membership=ada, created=_noon(3), duration_ms=30.0)
    tool_call_days_roll_up(now=_noon(0))
    total = ToolCallDayTotal.objects.get(day=_noon(3).date())
    assert (total.calls, total.timed_calls, total.p50_ms) == (2, 2, 20.0)


def test_a_late_row_older_than_the_window_waits_for_a_longer_run(ada):
    tool_call_days_roll_up(now=_noon(0))
    AuditEventFactory.create(membership=ada, created=_noon(ROLLUP_DAYS + 5), target="old")
    tool_call_days_roll_up(now=_noon(0))
    assert ToolCallDay.objects.filter(tool="old").exists() is False
    tool_call_days_roll_up(now=_noon(0), days=ROLLUP_DAYS + 10)
    assert _tools(_noon(ROLLUP_DAYS + 5)) == [("old", 1, 0)]


def test_purged_rows_leave_their_days_rollup_as_it_was(ada):
    AuditEventFactory.create_batch(2, membership=ada, created=_noon(5), target="search")
    tool_call_days_roll_up(now=_noon(0))
    audit_purge(before=_noon(2))
    assert tool_call_days_roll_up(now=_noon(0)) == []
    assert _tools(_noon(5)) == [("search", 2, 0)]


def test_calls_of_no_tenant_are_counted_in_the_day_but_belong_to_no_rollup_row(ada):
    AuditEventFactory.create(membership=ada, created=_noon(1), tenant=None, target="orphan")
    tool_call_days_roll_up(now=_noon(0))
    assert (RolledUpDay.objects.get(day=_noon(1).date()).calls, ToolCallDay.objects.count()) == (1, 0)


def test_calls_of_no_tenant_do_not_roll_their_day_up_again_and_again(ada):
    AuditEventFactory.create(membership=ada, created=_noon(1), tenant=None)
    tool_call_days_roll_up(now=_noon(0))
    assert tool_call_days_roll_up(now=_noon(0)) == []


def _all_tenants_tools(day: datetime) -> list[tuple[str, int, int]]:
    rows = AllTenantsToolCallDay.objects.filter(day=day.date()).values_list("tool", "calls", "errors")
    return sorted(rows)


def _all_tenants_total(day: datetime) -> tuple:
    total = AllTenantsToolCallDayTotal.objects.get(day=day.date())
    return (total.calls, total.errors, total.timed_calls, total.p50_ms, total.p95_ms)


def test_a_tool_s_calls_in_every_tenant_and_of_none_are_one_row_of_the_day(ada):
    other = MembershipFactory.create(tenant=TenantFactory.create(slug="elsewhere"))
    AuditEventFactory.create_batch(2, membership=ada, created=_noon(1), target="search")
    AuditEventFactory.create(membership=other, created=_noon(1), target="search", outcome=AuditOutcome.ERROR)
    AuditEventFactory.create(membership=ada, created=_noon(1), target="search", tenant=None)
    AuditEventFactory.create(membership=other, created=_noon(1), target="fetch")
    tool_call_days_roll_up(now=_noon(0))
    assert _all_tenants_tools(_noon(1)) == [("fetch", 1, 0), ("search", 4, 1)]


def test_the_day_s_total_over_every_tenant_has_percentiles_over_all_its_calls(ada):
    other = MembershipFactory.create(tenant=TenantFactory.create(slug="elsewhere"))
    for duration in (10.0, 20.0):
        AuditEventFactory.create(membership=ada, created=_noon(1), duration_ms=duration)
    AuditEventFactory.create(membership=other, created=_noon(1), duration_ms=30.0, outcome=AuditOutcome.ERROR)
    AuditEventFactory.create(membership=ada, created=_noon(1), duration_ms=40.0, tenant=None)
    AuditEventFactory.create(membership=other, created=_noon(1), duration_ms=None)
    tool_call_days_roll_up(now=_noon(0))
    # percentile_cont of 10, 20, 30, 40: not the median of each tenant's medians (15 and 30).
    assert _all_tenants_total(_noon(1)) == (5, 1, 4, 25.0, pytest.approx(38.5))


def test_a_day_without_calls_has_a_total_over_every_tenant_of_zero(ada):
    tool_call_days_roll_up(now=_noon(0))
    assert _all_tenants_total(_noon(1)) == (0, 0, 0, None, None)


def test_a_late_row_counts_again_in_the_rows_over_every_tenant(ada):
    AuditEventFactory.create(membership=ada, created=_noon(3), target="search", duration_ms=10.0)
    tool_call_days_roll_up(now=_noon(0))
    AuditEventFactory.create(membership=ada, created=_noon(3), target="search", duration_ms=30.0, tenant=None)
    tool_call_days_roll_up(now=_noon(0))
    assert (_all_tenants_tools(_noon(3)), _all_tenants_total(_noon(3))[:4]) == (
        [("search", 2, 0)],
        (2, 0, 2, 20.0),
    )


def test_a_deleted_tenant_s_calls_stay_in_the_rows_over_every_tenant(ada, tenant):
    AuditEventFactory.create_batch(2, membership=ada, created=_noon(2), target="search")
    tool_call_days_roll_up(now=_noon(0))
    tenant.delete()
    assert (_all_tenants_tools(_noon(2)), ToolCallDay.objects.count()) == ([("search", 2, 0)], 0)


@pytest.mark.django_db(transaction=True)
def test_two_runs_at_once_roll_each_day_up_once(tenant):
    membership = MembershipFactory.create(tenant=tenant)
    AuditEventFactory.create_batch(3, membership=membership, created=_noon(2), target="search")
    results: list[object] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        try:
            barrier.wait(5)
            results.append(len(tool_call_days_roll_up(now=_noon(0))))
        except Exception as error:
            results.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results, key=str) == [0, ROLLUP_DAYS]
    assert (_tools(_noon(2)), _all_tenants_tools(_noon(2))) == ([("search", 3, 0)], [("search", 3, 0)])


@pytest.mark.django_db(transaction=True)
def test_the_jobs_worker_rolls_up_when_it_starts(tenant):
    AuditEventFactory.create(membership=MembershipFactory.create(tenant=tenant), created=_noon(1))
    stop = threading.Event()
    stop.set()  # one round, then stop
    _roll_up_forever(stop)
    assert RolledUpDay.objects.filter(day=_noon(1).date()).exists() is True


def test_the_command_says_which_days_it_rolled_up(ada, capsys):
    call_command("audit_rollup", "--days", "3")
    first, last = _today() - timedelta(days=3), _today() - timedelta(days=1)
    assert capsys.readouterr().out == f"Rolled up 3 day(s), {first} to {last}.\n"


def test_the_command_says_when_nothing_was_left_to_do(ada, capsys):
    call_command("audit_rollup", "--days", "3")
    capsys.readouterr()
    call_command("audit_rollup", "--days", "3")
    assert capsys.readouterr().out == "Nothing to roll up: the last 3 finished day(s) are up to date.\n"


@pytest.mark.parametrize("days", ["0", "-1", "100000"])
def test_the_command_refuses_a_window_out_of_bounds(days):
    with pytest.raises(CommandError, match="--days must be between 1 and 3660"):
        call_command("audit_rollup", "--days", days)

"""The dashboard's health panel: job workers seen lately (by a task they took or a step's heartbeat),
tasks waiting for a worker and jobs for a decision, upstreams whose latest call found them down, and
audit rows waiting in this host's spool, each as the JSON and the page say it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult, get_date_max

from core.errors import UpstreamUnavailable
from core.metrics import metrics_registry
from core.models import AuditOutcome
from jobs.models import Job, JobState
from portal.operator.health import WORKERS_WINDOW
from tests.support.factories import AuditEventFactory, MembershipFactory, TenantFactory

pytestmark = pytest.mark.django_db

DATA_URL = "/admin/dashboard.json"
DOWN = UpstreamUnavailable.jsonrpc_code


def _health(client) -> dict:
    response = client.get(DATA_URL)
    assert response.status_code == 200
    return response.json()["health"]


@pytest.fixture
def membership():
    return MembershipFactory.create(tenant=TenantFactory.create(slug="north"))


def _task(*, status: str = "READY", worker: str | None = None, ago: timedelta = timedelta(0), run_after=None):
    moment = timezone.now() - ago
    task = DBTaskResult.objects.create(
        status=status,
        args_kwargs={"args": [], "kwargs": {}},
        task_path="jobs.steps.job_step_run",
        backend_name="default",
        run_after=run_after or get_date_max(),
        exception_class_path="",
        traceback="",
        worker_ids=[worker] if worker else [],
    )
    if worker:
        DBTaskResult.objects.filter(pk=task.pk).update(started_at=moment, enqueued_at=moment)
    return task


def _job(membership, **fields) -> Job:
    return Job.objects.create(tenant=membership.tenant, user=membership.user, kind="test", **fields)


def _forwarded(membership, *, upstream: str, down: bool, ago: timedelta) -> None:
    detail: dict[str, object] = {"method": "tools/call", "upstream": upstream}
    if down:
        detail["code"] = DOWN
    AuditEventFactory.create(
        membership=membership,
        created=timezone.now() - ago,
        target=f"{upstream}_search",
        outcome=AuditOutcome.ERROR if down else AuditOutcome.OK,
        detail=detail,
    )


# Workers


def test_a_worker_that_took_a_task_lately_is_seen(client, operator):
    _task(status="SUCCESSFUL", worker="host-a:101", ago=timedelta(minutes=2))
    seen = _health(client)["workers"]["seen"]
    assert [w["name"] for w in seen] == ["host-a:101"]


def test_a_worker_renewing_a_step_s_heartbeat_is_seen_with_its_running_steps(client, operator, membership):
    _job(membership, state=JobState.RUNNING, step_worker="host-b:7", step_heartbeat=timezone.now())
    _job(membership, state=JobState.RUNNING, step_worker="host-b:7", step_heartbeat=timezone.now())
    assert _health(client)["workers"]["seen"][0] | {"lastSeen": None} == {
        "name": "host-b:7",
        "lastSeen": None,
        "stepsRunning": 2,
    }


def test_a_worker_last_seen_before_the_window_is_not_listed(client, operator):
    _task(status="SUCCESSFUL", worker="host-a:101", ago=WORKERS_WINDOW + timedelta(minutes=1))
    assert _health(client)["workers"]["seen"] == []


def test_the_page_says_to_start_a_worker_when_tasks_wait_and_none_is_seen(client, operator):
    _task()
    page = client.get("/admin/").content.decode()
    assert '<p class="figure alarm" id="figure-tasks"><strong>1</strong> tasks waiting for a worker' in page
    assert "start <code>manage.py jobs_worker</code>" in page


# Waiting


def test_tasks_ready_to_run_are_counted_and_those_scheduled_later_are_not(client, operator):
    _task()
    _task()
    _task(run_after=timezone.now() + timedelta(hours=1))
    _task(status="RUNNING", worker="host-a:1")
    backlog = _health(client)["backlog"]
    assert (backlog["tasksReady"], backlog["tasksRunning"]) == (2, 1)
    assert backlog["oldestReady"] is not None


def test_jobs_waiting_for_a_decision_and_running_on_a_lapsed_heartbeat_are_counted(
    client, operator, membership
):
    _job(membership, state=JobState.WAITING)
    _job(membership, state=JobState.WAITING)
    stale = timezone.now() - timedelta(hours=1)
    _job(
        membership,
        state=JobState.RUNNING,
        step_token="00000000-0000-0000-0000-000000000001",
        step_worker="gone:1",
        step_heartbeat=stale,
    )
    _job(membership, state=JobState.COMPLETE)
    backlog = _health(client)["backlog"]
    assert (backlog["jobsWaiting"], backlog["jobsRunning"], backlog["jobsStalled"]) == (2, 1, 1)


# Upstreams


def test_an_upstream_whose_latest_call_found_it_down_is_failing(client, operator, membership):
    _forwarded(membership, upstream="docs", down=False, ago=timedelta(minutes=30))
    _forwarded(membership, upstream="docs", down=True, ago=timedelta(minutes=5))
    upstreams = _health(client)["upstreams"]
    assert upstreams["failing"] == 1
    assert [
        (u["tenant"], u["name"], u["calls"], u["unavailable"], u["failing"]) for u in upstreams["list"]
    ] == [("north", "docs", 2, 1, True)]


def test_an_upstream_that_answered_after_being_down_is_not_failing(client, operator, membership):
    _forwarded(membership, upstream="docs", down=True, ago=timedelta(minutes=30))
    _forwarded(membership, upstream="docs", down=False, ago=timedelta(minutes=5))
    upstreams = _health(client)["upstreams"]
    assert upstreams["failing"] == 0
    assert upstreams["list"][0]["unavailable"] == 1


def test_calls_older_than_the_hour_and_calls_to_no_upstream_are_left_out(client, operator, membership):
    _forwarded(membership, upstream="docs", down=True, ago=timedelta(hours=2))
    AuditEventFactory.create(membership=membership, outcome=AuditOutcome.ERROR, detail={"code": DOWN})
    upstreams = _health(client)["upstreams"]
    assert (upstreams["called"], upstreams["list"]) == (0, [])


def test_the_page_names_a_failing_upstream_in_its_table(client, operator, membership):
    _forwarded(membership, upstream="docs", down=True, ago=timedelta(minutes=5))
    page = client.get("/admin/").content.decode()
    assert '<td data-label="Upstream" class="wrap">north/docs</td>' in page
    assert '<strong class="alarm-text">failing</strong>' in page


# Spool


@pytest.fixture
def spool(settings, tmp_path):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_SPOOL_DIR": str(tmp_path)}
    return tmp_path


def test_the_spool_counts_the_rows_waiting_in_this_host_s_files(client, operator, spool):
    (spool / "audit-host-1.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    (spool / "audit-host-2.jsonl").write_text('{"a": 3}\n')
    (spool / "audit-host-1.rejected").write_text('{"torn"\n')
    assert _health(client)["spool"] | {"directory": None} == {
        "directory": None,
        "files": 2,
        "rows": 3,
        "unreadable": 0,
    }


def test_a_missing_spool_directory_is_an_empty_spool(client, operator, settings, tmp_path):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_SPOOL_DIR": str(tmp_path / "never-made")}
    assert (_health(client)["spool"]["files"], _health(client)["spool"]["rows"]) == (0, 0)


def test_the_page_shows_the_spool_s_rows_and_directory(client, operator, spool):
    (spool / "audit-host-1.jsonl").write_text('{"a": 1}\n')
    page = client.get("/admin/").content.decode()
    assert "<strong>1</strong> audit rows in the spool" in page
    assert f"<code>{spool}</code> on this host" in page


def test_the_spool_figure_is_the_backlog_metric_s_count(client, operator, spool):
    (spool / "audit-host-1.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    (spool / "audit-host-2.jsonl").write_text('{"a": 3}\n')
    scraped = metrics_registry().get_sample_value("gatehouse_audit_spool_backlog")
    assert (_health(client)["spool"]["rows"], scraped) == (3, 3.0)

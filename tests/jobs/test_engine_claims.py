"""The engine under failure, in one process: claims, recovery, cancel mid-step, failures,
decisions and ownership, on the engine's test kind (tests/jobs/engine_kind.py)."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from jobs.errors import JobNotFound
from jobs.models import Job, JobDecision, JobState
from jobs.recovery import ABANDONED_EXCEPTION, STEP_ATTEMPTS_MAX, jobs_recover
from jobs.selectors import job_decisions, job_get
from jobs.services import job_cancel, job_start
from jobs.steps import STEP_FAILED, job_step_run, step_claim
from tests.jobs import engine_kind
from tests.jobs.engine_kind import BOOM_DETAIL, ENGINE_TEST_KIND, engine_kind_register
from tests.jobs.support import job_decide_pending, steps_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def kind():
    engine_kind_register()
    engine_kind.during_step.clear()
    yield
    engine_kind.during_step.clear()


@pytest.fixture
def lease(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "JOBS_STEP_LEASE_SECONDS": 30}
    return timedelta(seconds=30)


def start(owner, **job_input) -> Job:
    return job_start(
        tenant_id=owner.tenant_id, user_id=owner.user_id, kind=ENGINE_TEST_KIND, job_input=job_input
    )


def task_row(job: Job) -> DBTaskResult:
    return DBTaskResult.objects.get(pk=job.step_task_id)


def run_task_directly(job: Job, token: object) -> str:
    return job_step_run.call(job_id=str(job.pk), token=str(token))


# Claims


def test_a_step_claimed_once_is_not_claimed_by_a_duplicate_task(owner, lease):
    job = start(owner)
    assert step_claim(job_id=str(job.pk), token=str(job.step_token), worker="w1")
    assert not step_claim(job_id=str(job.pk), token=str(job.step_token), worker="w2")
    job.refresh_from_db()
    assert job.step_worker == "w1"
    assert job.step_attempts == 1


def test_a_kinds_steps_go_to_its_own_queue(owner, lease):
    job = start(owner)
    assert task_row(job).queue_name == engine_kind.ENGINE_TEST_QUEUE


def test_a_worker_without_the_kind_leaves_the_step_for_one_that_has_it(owner, lease, monkeypatch, caplog):
    job = start(owner)
    monkeypatch.setattr("jobs.steps.job_kind_known", lambda name: False)
    with caplog.at_level(logging.WARNING, logger="jobs.steps"):
        assert run_task_directly(job, job.step_token) == "kind unknown here"
    job.refresh_from_db()
    assert (job.state, job.step_worker, job.step_attempts) == (JobState.RUNNING, "", 0)
    assert "does not have" in caplog.text
    # After the lease the recovery hands it on, under a new token, and a worker with the kind runs it.
    Job.objects.filter(pk=job.pk).update(updated=timezone.now() - timedelta(seconds=31))
    DBTaskResult.objects.filter(pk=job.step_task_id).update(status="SUCCESSFUL")
    assert jobs_recover() == 1
    monkeypatch.undo()
    steps_run()
    job.refresh_from_db()
    assert (job.state, job.checkpoint_kind) == (JobState.WAITING, "review")


def test_a_duplicate_task_of_a_finished_step_does_nothing(owner, lease, tmp_path):
    log = tmp_path / "runs.log"
    job = start(owner, log=str(log))
    token = job.step_token
    steps_run()
    assert run_task_directly(job, token) == "not claimed"
    job.refresh_from_db()
    assert job.state == JobState.WAITING
    assert len(log.read_text().splitlines()) == 1


def test_a_stale_token_is_not_claimed(owner, lease):
    job = start(owner)
    assert not step_claim(job_id=str(job.pk), token=str(uuid.uuid4()), worker="w1")
    assert run_task_directly(job, uuid.uuid4()) == "not claimed"


def test_a_cancelled_jobs_task_does_nothing(owner, lease, tmp_path):
    log = tmp_path / "runs.log"
    job = start(owner, log=str(log))
    token = job.step_token
    job_cancel(tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=job.pk)
    assert run_task_directly(job, token) == "not claimed"
    assert not log.exists()
    steps_run()
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert task_row(job).status == "SUCCESSFUL"


def test_a_live_claim_is_not_stolen(owner, lease):
    job = start(owner)
    assert step_claim(job_id=str(job.pk), token=str(job.step_token), worker="w1")
    Job.objects.filter(pk=job.pk).update(step_heartbeat=timezone.now() - lease + timedelta(seconds=5))
    assert not step_claim(job_id=str(job.pk), token=str(job.step_token), worker="w2")


def test_a_stale_claim_is_taken_and_the_old_workers_outcome_is_dropped(owner, lease):
    job = start(owner)
    assert step_claim(job_id=str(job.pk), token=str(job.step_token), worker="w1")
    Job.objects.filter(pk=job.pk).update(step_heartbeat=timezone.now() - lease - timedelta(seconds=1))
    assert step_claim(job_id=str(job.pk), token=str(job.step_token), worker="w2")
    job.refresh_from_db()
    assert job.step_worker == "w2"
    assert job.step_attempts == 2
    from jobs.kinds import Checkpoint
    from jobs.steps import step_finish

    outcome = Checkpoint(kind="review", payload={}, context={})
    assert step_finish(
        job_id=str(job.pk), token=str(job.step_token), worker="w1", outcome=outcome
    ).startswith("dropped")
    assert step_finish(job_id=str(job.pk), token=str(job.step_token), worker="w2", outcome=outcome) == (
        "checkpoint review"
    )


# Recovery


def test_a_stale_heartbeat_is_enqueued_again_under_a_new_token(owner, lease, tmp_path):
    log = tmp_path / "runs.log"
    job = start(owner, log=str(log))
    old_token, old_task = job.step_token, job.step_task_id
    # A worker took the task and claimed the job, then died.
    DBTaskResult.objects.get(pk=old_task).claim("dead-worker")
    assert step_claim(job_id=str(job.pk), token=str(old_token), worker="dead-worker")
    assert jobs_recover() == 0
    assert jobs_recover(now=timezone.now() + lease + timedelta(seconds=1)) == 1
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert job.step_token != old_token
    assert job.step_task_id != old_task
    assert job.step_worker == ""
    assert job.step_attempts == 1
    old = DBTaskResult.objects.get(pk=old_task)
    assert old.status == "FAILED"
    assert old.exception_class_path == ABANDONED_EXCEPTION
    # The old task, should it ever run, does nothing; the new one reaches the checkpoint once.
    assert run_task_directly(job, old_token) == "not claimed"
    steps_run()
    job.refresh_from_db()
    assert job.state == JobState.WAITING
    assert job.checkpoint == {"iteration": 0, "rounds": 1}
    assert len(log.read_text().splitlines()) == 1


def test_a_task_left_running_by_a_worker_that_died_before_claiming_is_enqueued_again(owner, lease):
    job = start(owner)
    old_task = job.step_task_id
    DBTaskResult.objects.get(pk=old_task).claim("dead-worker")
    later = timezone.now() + lease + timedelta(seconds=1)
    assert jobs_recover(now=later) == 1
    job.refresh_from_db()
    assert job.step_task_id != old_task
    assert DBTaskResult.objects.get(pk=old_task).status == "FAILED"
    assert task_row(job).status == "READY"
    steps_run()
    job.refresh_from_db()
    assert job.state == JobState.WAITING


def test_a_task_left_running_after_its_outcome_was_stored_is_closed(owner, lease):
    job = start(owner)
    task = DBTaskResult.objects.get(pk=job.step_task_id)
    task.claim("dies-after-storing")
    assert run_task_directly(job, job.step_token) == "checkpoint review"
    # The worker died before marking its task row: it says "running" still.
    assert jobs_recover() == 0
    assert DBTaskResult.objects.get(pk=task.pk).status == "RUNNING"
    assert jobs_recover(now=timezone.now() + lease + timedelta(seconds=1)) == 0
    closed = DBTaskResult.objects.get(pk=task.pk)
    assert closed.status == "FAILED"
    assert closed.exception_class_path == ABANDONED_EXCEPTION
    assert Job.objects.get(pk=job.pk).state == JobState.WAITING


def test_a_task_still_queued_is_left_alone(owner, lease):
    job = start(owner)
    assert jobs_recover(now=timezone.now() + lease * 10) == 0
    job.refresh_from_db()
    assert task_row(job).status == "READY"
    assert Job.objects.get(pk=job.pk).step_token == job.step_token


def test_a_step_that_keeps_killing_its_worker_fails_the_job(owner, lease):
    job = start(owner)
    for attempt in range(STEP_ATTEMPTS_MAX):
        job.refresh_from_db()
        assert step_claim(job_id=str(job.pk), token=str(job.step_token), worker=f"dead-{attempt}")
        assert jobs_recover(now=timezone.now() + lease + timedelta(seconds=1)) == 1
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert "interrupted 5 times" in job.error
    assert job.step_token is None


# Cancel while a step runs


def test_cancel_while_a_step_runs_drops_its_outcome_and_enqueues_nothing(owner, lease):
    job = start(owner)

    def cancel(view) -> None:
        job_cancel(tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=view.id)

    engine_kind.during_step.append(cancel)
    tasks_before = DBTaskResult.objects.count()
    steps_run()
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert job.checkpoint is None
    assert job.step_token is None
    assert DBTaskResult.objects.count() == tasks_before
    assert task_row(job).return_value.startswith("dropped")


# Failures


def test_job_failed_stores_its_message(owner, lease):
    job = start(owner, fail="job_failed")
    steps_run()
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error == "The input cannot be worked on."
    assert job.finished is not None


def test_an_unexpected_exception_stores_the_generic_message_and_is_logged(owner, lease, caplog):
    job = start(owner, fail="boom")
    with caplog.at_level(logging.ERROR, logger="jobs.steps"):
        steps_run()
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error == STEP_FAILED
    assert BOOM_DETAIL not in job.error
    assert any(BOOM_DETAIL in (record.exc_text or "") or record.exc_info for record in caplog.records)
    assert BOOM_DETAIL in caplog.text


def test_a_lost_database_in_a_step_leaves_it_for_recovery_not_failed(owner, lease):
    job = start(owner, fail="database")
    steps_run()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert job.step_worker == "test-worker"
    assert task_row(job).return_value.startswith("left for recovery")
    assert jobs_recover(now=timezone.now() + lease + timedelta(seconds=1)) == 1


def test_a_claim_on_a_dead_connection_is_retried_on_a_new_one(owner, lease):
    job = start(owner)
    # The connection dies under the worker (the database restarted): its socket is closed.
    connection.ensure_connection()
    connection.connection.close()
    assert run_task_directly(job, job.step_token) == "checkpoint review"


# Decisions and ownership


def test_every_decision_is_kept_in_order(owner, lease):
    job = start(owner)
    steps_run()
    job_decide_pending(
        tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=job.pk, action="edit", note="again"
    )
    steps_run()
    job_decide_pending(tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=job.pk, action="approve")
    job.refresh_from_db()
    assert job.state == JobState.COMPLETE
    assert job.result == {"rounds": 2}
    assert [(d.action, d.iteration, d.note) for d in job_decisions(job=job)] == [
        ("edit", 0, "again"),
        ("approve", 1, ""),
    ]


def test_another_persons_or_tenants_job_is_not_found(owner, member, outsider, lease):
    job = start(owner)
    steps_run()
    for other in (member, outsider):
        with pytest.raises(JobNotFound):
            job_get(tenant_id=other.tenant_id, user_id=other.user_id, job_id=job.pk)
        with pytest.raises(JobNotFound):
            job_decide_pending(
                tenant_id=other.tenant_id, user_id=other.user_id, job_id=job.pk, action="approve"
            )
        with pytest.raises(JobNotFound):
            job_cancel(tenant_id=other.tenant_id, user_id=other.user_id, job_id=job.pk)
    # The owner's id in the other tenant is not the owner's job either.
    with pytest.raises(JobNotFound):
        job_get(tenant_id=outsider.tenant_id, user_id=owner.user_id, job_id=job.pk)
    assert JobDecision.objects.count() == 0
    assert Job.objects.get(pk=job.pk).state == JobState.WAITING

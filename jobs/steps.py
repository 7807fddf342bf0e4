"""One step of a job, run by a task-queue worker (django-tasks, ``manage.py jobs_worker``).

A step first claims its job: a conditional update that succeeds only while the job is running,
still wants this very step (its token), and no live worker holds it. So a task enqueued twice, a
task of a cancelled job, or a task the recovery replaced does nothing, and two workers never run the
same step. While the kind works, a thread renews the claim's heartbeat; a worker that dies stops
renewing it, and ``jobs.recovery`` enqueues the step again under a new token. The outcome is
written with the same condition, so a step whose job was cancelled meanwhile changes nothing.

A lost database connection never kills the worker nor fails the job: the claim and the outcome are
retried on a new connection a few times; a kind whose own queries lose the database leaves its step
claimed, and once the heartbeat has stopped for a lease the recovery runs it again.

What a step leads to (the next step enqueued, a checkpoint, the end) is written here too, beside the
task that the next step enqueues: the services (start, decide, cancel) and the recovery use them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

# The django-tasks backport of Django 6's tasks API: on Django 6 this import becomes django.tasks.
from django_tasks import task

from core.conf import gatehouse_settings
from jobs.kinds import (
    Checkpoint,
    Complete,
    JobFailed,
    JobView,
    NextStep,
    StepOutcome,
    job_kind_get,
    job_kind_known,
    job_kind_queue,
)
from jobs.models import ERROR_MAX_CHARS, PROGRESS_MESSAGE_MAX_CHARS, Job, JobState

logger = logging.getLogger(__name__)

T = TypeVar("T")
# A database that went away (restarted, failed over, network cut): the connection is dead, the
# query did not run or its transaction was rolled back. Anything else is a bug, not retried.
CONNECTION_ERRORS = (OperationalError, InterfaceError)
DB_RETRY_ATTEMPTS = 5
DB_RETRY_FIRST_DELAY_SECONDS = 0.2

STEP_FAILED = "The step failed unexpectedly. It has been logged; start a new search or contact the operator."
_worker_id = f"{socket.gethostname()[:40]}:{os.getpid()}"


def worker_id() -> str:
    """This process, as the job rows name the worker running a step."""
    return _worker_id


def worker_id_set(value: str) -> None:
    global _worker_id
    _worker_id = value[:64]


@task()
def job_step_run(*, job_id: str, token: str) -> str:
    """Run the step ``token`` names, if it is still the job's; returns what happened (for the
    task's own result row: "claimed elsewhere", "checkpoint plan", ...)."""
    worker = worker_id()
    kind = db_retry(lambda: Job.objects.filter(pk=job_id).values_list("kind", flat=True).first())
    if kind is not None and not job_kind_known(kind):
        # A worker without the kind's app (an older release mid-deploy, a worker set up for other
        # queues) leaves the step unclaimed: the recovery enqueues it again after the lease, for a
        # worker that has it, instead of this one failing the job.
        logger.warning(
            "Job %s is of kind %r, which this worker does not have; left for another", job_id, kind
        )
        return "kind unknown here"
    if not db_retry(lambda: step_claim(job_id=job_id, token=token, worker=worker)):
        return "not claimed"
    job = db_retry(lambda: Job.objects.get(pk=job_id))
    stop = threading.Event()
    beat = threading.Thread(
        target=_heartbeat,
        kwargs={"job_id": job_id, "token": token, "worker": worker, "stop": stop},
        daemon=True,
    )
    beat.start()
    try:
        outcome = _run(job=job)
    finally:
        stop.set()
        beat.join()
    if isinstance(outcome, _DatabaseLost):
        # Not the job's fault: left claimed; the recovery runs it again once the lease has passed.
        return "left for recovery: the database connection was lost"
    return db_retry(lambda: step_finish(job_id=job_id, token=token, worker=worker, outcome=outcome))


def db_retry(operation: Callable[[], T]) -> T:
    """``operation`` again on a new connection while the database is unreachable, a few times.

    Every operation retried here is one conditional statement or one transaction, so a retry after
    an ambiguous commit finds the token moved on and changes nothing."""
    delay = DB_RETRY_FIRST_DELAY_SECONDS
    for attempt in range(1, DB_RETRY_ATTEMPTS + 1):
        try:
            return operation()
        except CONNECTION_ERRORS:
            if attempt == DB_RETRY_ATTEMPTS or connection.in_atomic_block:
                raise
            logger.warning("Database unreachable (attempt %d); trying again", attempt, exc_info=True)
            connection.close()
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def step_claim(*, job_id: str, token: str, worker: str) -> bool:
    """Take the step for ``worker``: only while the job still wants this token and nobody alive
    holds it (a heartbeat older than the lease means its worker is gone)."""
    now = timezone.now()
    stale = now - timedelta(seconds=gatehouse_settings.JOBS_STEP_LEASE_SECONDS)
    claimed = (
        Job.objects.filter(pk=job_id, state=JobState.RUNNING, step_token=token)
        .filter(Q(step_worker="") | Q(step_heartbeat__lt=stale))
        .update(step_worker=worker, step_heartbeat=now, step_attempts=F("step_attempts") + 1)
    )
    return claimed == 1


def _heartbeat(*, job_id: str, token: str, worker: str, stop: threading.Event) -> None:
    interval = max(0.2, gatehouse_settings.JOBS_STEP_LEASE_SECONDS / 4)
    try:
        while not stop.wait(interval):
            try:
                renewed = Job.objects.filter(pk=job_id, step_token=token, step_worker=worker).update(
                    step_heartbeat=timezone.now()
                )
            except Exception:
                # A missed beat is not fatal: the lease is four beats long. Try on a new connection.
                logger.warning("Could not renew the heartbeat of job %s", job_id, exc_info=True)
                connection.close()
                continue
            if not renewed:
                # Cancelled or taken over: the outcome will be dropped; nothing left to keep alive.
                return
    finally:
        connection.close()


class _Failed:
    def __init__(self, error: str) -> None:
        self.error = error


class _DatabaseLost:
    pass


def _run(*, job: Job) -> StepOutcome | _Failed | _DatabaseLost:
    def report(message: str) -> None:
        Job.objects.filter(pk=job.pk, step_token=job.step_token, state=JobState.RUNNING).update(
            progress=F("progress") + 1, progress_message=message[:PROGRESS_MESSAGE_MAX_CHARS]
        )

    try:
        return job_kind_get(job.kind).run_step(job=job_view(job), step=job.step, report=report)
    except JobFailed as failure:
        return _Failed(failure.message)
    except CONNECTION_ERRORS:
        logger.warning(
            "Step %r of job %s lost the database; left for recovery", job.step, job.pk, exc_info=True
        )
        connection.close()
        return _DatabaseLost()
    except Exception:
        logger.exception("Step %r of job %s (%s) failed", job.step, job.pk, job.kind)
        close_old_connections()
        return _Failed(STEP_FAILED)


def step_finish(*, job_id: str, token: str, worker: str, outcome: StepOutcome | _Failed) -> str:
    """Store the outcome if the step is still this worker's; returns what happened."""
    with transaction.atomic():
        job = (
            Job.objects.select_for_update()
            .filter(pk=job_id, state=JobState.RUNNING, step_token=token, step_worker=worker)
            .first()
        )
        if job is None:
            return "dropped: the job moved on (cancelled or recovered)"
        job.progress += 1
        if isinstance(outcome, _Failed):
            job_finish(job=job, state=JobState.FAILED, message="Failed.", error=outcome.error)
            job.save()
            return "failed"
        return outcome_store(job=job, outcome=outcome)


# The job's transitions after a step, here with the step's task that the next step enqueues: the
# services (start, decide, cancel) and the recovery use them too.


def job_view(job: Job) -> JobView:
    return JobView(
        id=str(job.id),
        tenant_id=job.tenant_id,
        user_id=job.user_id,
        kind=job.kind,
        input=job.input,
        context=job.context,
        iteration=job.iteration,
        checkpoint_kind=job.checkpoint_kind,
        checkpoint=job.checkpoint,
    )


def step_enqueue(*, job: Job, step: str, attempts: int = 0) -> None:
    """Make ``step`` the job's next step under a new token and enqueue its task; saves the job.

    Call inside a transaction: the task row and the job row commit together. ``attempts`` carries
    the claims a recovered step already had (``jobs.recovery``); a new step starts at 0.
    """
    token = uuid.uuid4()
    job.state = JobState.RUNNING
    job.step = step
    job.step_token = token
    job.step_worker = ""
    job.step_heartbeat = None
    job.step_attempts = attempts
    job.checkpoint_kind = ""
    job.checkpoint = None
    queue = job_kind_queue(job_kind_get(job.kind))
    result = job_step_run.using(queue_name=queue).enqueue(job_id=str(job.id), token=str(token))
    job.step_task_id = str(result.id)[:64]
    job.save()


def outcome_store(*, job: Job, outcome: NextStep | Checkpoint | Complete) -> str:
    """Apply what a step or a decision leads to and save the job (enqueuing the next step, if
    any, in the caller's transaction); returns what happened, for the task's result row."""
    if outcome.message:
        job.progress_message = outcome.message[:PROGRESS_MESSAGE_MAX_CHARS]
    if isinstance(outcome, NextStep):
        job.context = outcome.context
        step_enqueue(job=job, step=outcome.step)
        return f"next {outcome.step}"
    if isinstance(outcome, Checkpoint):
        job.state = JobState.WAITING
        job.checkpoint_kind = outcome.kind
        job.checkpoint = outcome.payload
        job.context = outcome.context
        _step_clear(job)
        job.save()
        return f"checkpoint {outcome.kind}"
    job.result = outcome.result
    if outcome.context:
        job.context = outcome.context
    job_finish(job=job, state=JobState.COMPLETE, message=outcome.message or "Complete.")
    job.save()
    return "complete"


def job_finish(*, job: Job, state: str, message: str = "", error: str = "") -> None:
    """End the job in ``state`` (complete, failed, cancelled); the caller saves it."""
    job.state = state
    _step_clear(job)
    job.checkpoint_kind = ""
    job.checkpoint = None
    job.finished = timezone.now()
    if message:
        job.progress_message = message[:PROGRESS_MESSAGE_MAX_CHARS]
    if error:
        job.error = error[:ERROR_MAX_CHARS]


def _step_clear(job: Job) -> None:
    job.step = ""
    job.step_token = None
    job.step_worker = ""
    job.step_heartbeat = None

"""Steps whose worker died: enqueued again under a new token.

A worker killed mid-step (a deploy, an out-of-memory kill, a lost machine) stops renewing its
claim's heartbeat; after ``JOBS_STEP_LEASE_SECONDS`` the step is anybody's. A worker killed after
the task queue handed it the task but before it claimed the job leaves the job unclaimed and the
task row marked running forever; that too is enqueued again once the lease has passed. The old
task, if it ever runs, finds its token gone and does nothing; its task row, which its dead worker
would leave "running" for ever, is marked failed with ``ABANDONED_EXCEPTION`` so the queue's own
view tells the truth. A step that was taken over ``STEP_ATTEMPTS_MAX`` times (one that kills its
worker each time, say) fails its job instead of looping. Every worker runs this at start and then
every lease/2 seconds (``manage.py jobs_worker``), so it needs no scheduler of its own.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.conf import gatehouse_settings
from jobs.models import Job, JobState
from jobs.steps import job_finish, job_step_run, step_enqueue

logger = logging.getLogger(__name__)

STEP_ATTEMPTS_MAX = 5
RECOVER_BATCH = 500
ABANDONED_EXCEPTION = "jobs.recovery.StepAbandoned"
STEP_ABANDONED = (
    "The step was interrupted {attempts} times (its worker stopped each time); the job stops here."
)


def jobs_recover(*, now: datetime | None = None) -> int:
    """Enqueue again the steps nobody alive is running; returns how many (failed ones included)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=gatehouse_settings.JOBS_STEP_LEASE_SECONDS)
    lost = Q(step_worker="", updated__lt=stale) | Q(step_heartbeat__lt=stale)
    candidates = Job.objects.filter(state=JobState.RUNNING, step_token__isnull=False).filter(lost)
    recovered = 0
    for job_id in list(candidates.values_list("pk", flat=True)[:RECOVER_BATCH]):
        with transaction.atomic():
            # Checked again under the row's lock: another worker's recovery or a late claim may
            # have got there first (skip_locked: that one is busy with it).
            job = (
                Job.objects.select_for_update(skip_locked=True)
                .filter(pk=job_id, state=JobState.RUNNING, step_token__isnull=False)
                .filter(lost)
                .first()
            )
            if job is not None and _step_recover(job=job, now=now):
                recovered += 1
    _finished_steps_task_rows_close(stale=stale, now=now)
    return recovered


def _finished_steps_task_rows_close(*, stale: datetime, now: datetime) -> None:
    """Task rows left "running" by a worker that died after storing its step's outcome (or whose
    job moved on without it): the job needs nothing, but the queue's view should not lie."""
    from django_tasks_db.models import DBTaskResult

    running = DBTaskResult.objects.filter(
        status="RUNNING", task_path=job_step_run.module_path, started_at__lt=stale
    ).only("pk", "args_kwargs", "worker_ids")
    for task in running[:RECOVER_BATCH]:
        kwargs = (task.args_kwargs or {}).get("kwargs", {})
        job = Job.objects.filter(pk=kwargs.get("job_id")).values("state", "step_token").first()
        if (
            job is not None
            and job["state"] == JobState.RUNNING
            and str(job["step_token"]) == kwargs.get("token")
        ):
            # Still the job's step: alive (heartbeat) or recovered above once its lease passes.
            continue
        DBTaskResult.objects.filter(pk=task.pk, status="RUNNING").update(
            status="FAILED",
            finished_at=now,
            exception_class_path=ABANDONED_EXCEPTION,
            traceback=f"Its worker {(task.worker_ids or ['(unknown)'])[-1]} stopped; the job had moved on.\n",
        )


def _step_recover(*, job: Job, now: datetime) -> bool:
    from django_tasks_db.models import DBTaskResult

    old_task = DBTaskResult.objects.filter(pk=job.step_task_id).first() if job.step_task_id else None
    if not job.step_worker and old_task is not None and old_task.status == "READY":
        # Still queued (workers busy or none running): not lost, just not taken yet.
        return False
    if old_task is not None and old_task.status in ("READY", "RUNNING"):
        DBTaskResult.objects.filter(pk=old_task.pk, status=old_task.status).update(
            status="FAILED",
            finished_at=now,
            exception_class_path=ABANDONED_EXCEPTION,
            traceback=f"Its worker {job.step_worker or '(unknown)'} stopped; the step was enqueued again.\n",
        )
    if job.step_attempts >= STEP_ATTEMPTS_MAX:
        logger.error(
            "Job %s: step %r abandoned %d times; failing the job", job.pk, job.step, job.step_attempts
        )
        job_finish(
            job=job,
            state=JobState.FAILED,
            message="Failed.",
            error=STEP_ABANDONED.format(attempts=job.step_attempts),
        )
        job.save()
        return True
    logger.warning(
        "Job %s: step %r was left by worker %r; enqueued again",
        job.pk,
        job.step,
        job.step_worker or "(none)",
    )
    step_enqueue(job=job, step=job.step, attempts=job.step_attempts)
    return True

"""Steps whose worker died: enqueued again under a new token.

A worker killed mid-step (a deploy, an out-of-memory kill, a lost machine) stops renewing its
claim's heartbeat; after ``JOBS_STEP_LEASE_SECONDS`` the step is anybody's. A worker killed after
the task queue handed it the task but before it claimed the job leaves the job unclaimed and the
task row marked running forever; that too is enqueued again once the lease has passed. The old
task, if it ever runs, finds its token gone and does nothing. Every worker runs this at start and
then every lease/2 seconds (``manage.py jobs_worker``), so it needs no scheduler of its own.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.conf import gatehouse_settings
from jobs.models import Job, JobState

logger = logging.getLogger(__name__)


def jobs_recover(*, now: datetime | None = None) -> int:
    """Enqueue again the steps nobody alive is running; returns how many."""
    from django_tasks_db.models import DBTaskResult

    from jobs.services import step_enqueue

    now = now or timezone.now()
    stale = now - timedelta(seconds=gatehouse_settings.JOBS_STEP_LEASE_SECONDS)
    candidates = Job.objects.filter(state=JobState.RUNNING, step_token__isnull=False).filter(
        Q(step_worker="", updated__lt=stale) | Q(step_heartbeat__lt=stale)
    )
    recovered = 0
    for job_id in candidates.values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            job = (
                Job.objects.select_for_update(skip_locked=True)
                .filter(pk=job_id, state=JobState.RUNNING, step_token__isnull=False)
                .filter(Q(step_worker="", updated__lt=stale) | Q(step_heartbeat__lt=stale))
                .first()
            )
            if job is None:
                continue
            if not job.step_worker and job.step_task_id:
                waiting = DBTaskResult.objects.filter(pk=job.step_task_id, status="READY").exists()
                if waiting:
                    # Still queued (workers busy or none running): not lost, just not taken yet.
                    continue
            logger.warning(
                "Job %s: step %r was left by worker %r; enqueued again",
                job.pk,
                job.step,
                job.step_worker or "(none)",
            )
            step_enqueue(job=job, step=job.step)
            recovered += 1
    return recovered

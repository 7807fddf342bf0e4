"""Running queued job steps inside a test: the worker's own loop, in batch mode, in this process."""

from __future__ import annotations

import uuid
from typing import Any

from django_tasks_db.management.commands.db_worker import Worker

from jobs.checkpoints import checkpoint_pending
from jobs.models import Job
from jobs.services import Decided, job_decide
from jobs.steps import worker_id_set


def steps_run(*, worker: str = "test-worker", max_tasks: int | None = None) -> None:
    """Run every ready step (and the steps they enqueue) until the queue is empty."""
    worker_id_set(worker)
    Worker(
        queue_names=["*"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=max_tasks,
        worker_id=worker,
        excluded_queue_names=[],
    ).run()


def job_decide_pending(*, tenant_id: int, user_id: int, job_id: uuid.UUID | str, **decision: Any) -> Decided:
    """``job_decide`` as a caller that was shown the job's pending checkpoint: naming it."""
    pending = checkpoint_pending(Job.objects.get(pk=job_id))
    return job_decide(tenant_id=tenant_id, user_id=user_id, job_id=job_id, checkpoint=pending, **decision)

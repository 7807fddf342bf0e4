"""Running queued job steps inside a test: the worker's own loop, in batch mode, in this process."""

from __future__ import annotations

from django_tasks_db.management.commands.db_worker import Worker

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

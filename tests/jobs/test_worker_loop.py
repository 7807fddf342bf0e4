"""``manage.py jobs_worker``'s loop outlives a database error: db_worker's own loop would end the
process on any error but a locked SQLite file."""

from __future__ import annotations

from django.db import OperationalError
from django_tasks_db.management.commands.db_worker import Worker

from jobs.management.commands import jobs_worker
from jobs.management.commands.jobs_worker import JobsWorker


def _worker() -> JobsWorker:
    return JobsWorker(
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="loop-test",
        excluded_queue_names=[],
    )


def test_the_loop_starts_again_after_a_database_error(monkeypatch):
    calls: list[int] = []

    def run(self) -> None:
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(Worker, "run", run)
    monkeypatch.setattr(jobs_worker.time, "sleep", lambda seconds: None)
    _worker().run()
    assert len(calls) == 3


def test_a_worker_shutting_down_does_not_start_again(monkeypatch):
    calls: list[int] = []

    def run(self) -> None:
        calls.append(1)
        self.running = False
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(Worker, "run", run)
    _worker().run()
    assert len(calls) == 1

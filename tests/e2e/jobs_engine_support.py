"""Shared by the engine's end-to-end tests (restarts, several workers): jobs of the engine's test
kind (tests/jobs/engine_kind.py) started and decided from the test process on committed rows, and
worker processes that load that kind (tests/jobs/worker_settings.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django_tasks_db.models import DBTaskResult

from accounts.models import Membership
from jobs.models import Job, JobDecision
from jobs.services import job_start
from tests.e2e.conftest import _in_own_thread
from tests.jobs.engine_kind import ENGINE_TEST_KIND, ENGINE_TEST_QUEUE, engine_kind_register
from tests.jobs.support import job_decide_pending
from tests.jobs.worker_process import JobsWorkerProcess

WORKER_SETTINGS = "tests.jobs.worker_settings"


class EngineJobs:
    """Jobs of the test kind owned by the demo's alice; every database call on a thread of its own
    (autocommit), so the worker processes see the rows at once."""

    def __init__(self, blocker: Any) -> None:
        engine_kind_register()
        self.blocker = blocker
        alice = self.db(lambda: Membership.objects.select_related("user").get(user__username="alice"))
        self.tenant_id = alice.tenant_id
        self.user_id = alice.user_id

    def db(self, work: Callable[[], Any]) -> Any:
        with self.blocker.unblock():
            return _in_own_thread(work)

    def start(self, **job_input: Any) -> str:
        job = self.db(
            lambda: job_start(
                tenant_id=self.tenant_id, user_id=self.user_id, kind=ENGINE_TEST_KIND, job_input=job_input
            )
        )
        return str(job.pk)

    def decide(self, job_id: str, action: str) -> Job:
        return self.db(
            lambda: (
                job_decide_pending(
                    tenant_id=self.tenant_id, user_id=self.user_id, job_id=job_id, action=action
                ).job
            )
        )

    def get(self, job_id: str) -> Job:
        return self.db(lambda: Job.objects.get(pk=job_id))

    def decisions(self, job_id: str) -> list[tuple[str, int]]:
        return self.db(
            lambda: list(JobDecision.objects.filter(job_id=job_id).values_list("action", "iteration"))
        )

    def tasks(self, job_ids: list[str]) -> list[DBTaskResult]:
        return self.db(
            lambda: [
                task
                for task in DBTaskResult.objects.order_by("enqueued_at")
                if task.args_kwargs.get("kwargs", {}).get("job_id") in job_ids
            ]
        )

    def wait(self, job_ids: list[str], until: Callable[[Job], bool], *, timeout: float = 90) -> list[Job]:
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.db(lambda: list(Job.objects.filter(pk__in=job_ids)))
            if len(jobs) == len(job_ids) and all(until(job) for job in jobs):
                return jobs
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"jobs not there in {timeout:.0f} s: {[(j.pk, j.state, j.step) for j in jobs]}"
                )
            time.sleep(0.2)


def engine_worker(*, env: dict[str, str], tmp_path: Path, worker_id: str, **extra: str) -> JobsWorkerProcess:
    worker = JobsWorkerProcess(
        env=env,
        log_path=tmp_path / f"{worker_id}.log",
        worker_id=worker_id,
        extra_env={"DJANGO_SETTINGS_MODULE": WORKER_SETTINGS, **extra},
        queue=ENGINE_TEST_QUEUE,
    )
    worker.start()
    return worker


def executions(log: Path) -> list[tuple[str, str, int, int]]:
    """Each line the test kind wrote: (job id, step, iteration, worker pid), one per execution."""
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        job_id, step, iteration, pid = line.split()
        rows.append((job_id, step, int(iteration), int(pid)))
    return rows


def wait_for(condition: Callable[[], bool], *, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)

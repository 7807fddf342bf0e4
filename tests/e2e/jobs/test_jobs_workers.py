"""Two ``manage.py jobs_worker`` processes on one database: they run steps of different jobs at
the same time, and no step ever runs twice (each execution is a line the test kind appends)."""

from __future__ import annotations

from collections import Counter

import pytest

from jobs.models import JobState
from tests.e2e.jobs_engine_support import EngineJobs, engine_worker, executions

JOB_COUNT = 10

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(django_db_blocker) -> EngineJobs:
    return EngineJobs(django_db_blocker)


def test_two_workers_share_the_steps_and_run_each_exactly_once(jobs, server, tmp_path):
    log = tmp_path / "executions.log"
    workers = [
        engine_worker(env=server.env, tmp_path=tmp_path, worker_id=name) for name in ("pair-a", "pair-b")
    ]
    try:
        job_ids = [jobs.start(log=str(log), sleep="0.5") for _ in range(JOB_COUNT)]
        jobs.wait(job_ids, lambda job: job.state == JobState.WAITING, timeout=120)
        for job_id in job_ids:
            jobs.decide(job_id, "edit")
        done = jobs.wait(
            job_ids, lambda job: job.state == JobState.WAITING and job.iteration == 1, timeout=120
        )

        runs = executions(log)
        counted = Counter((job_id, iteration) for job_id, _, iteration, _ in runs)
        assert set(counted) == {(job_id, iteration) for job_id in job_ids for iteration in (0, 1)}
        assert set(counted.values()) == {1}, [key for key, count in counted.items() if count > 1]
        assert all(job.checkpoint == {"iteration": 1, "rounds": 2} for job in done)

        tasks = jobs.tasks(job_ids)
        assert len(tasks) == 2 * JOB_COUNT
        assert all(task.status == "SUCCESSFUL" for task in tasks)
        assert all(len(task.worker_ids) == 1 for task in tasks)
        by_worker = Counter(task.worker_ids[0] for task in tasks)
        assert set(by_worker) == {"pair-a", "pair-b"}, by_worker
        assert len({pid for *_, pid in runs}) == 2
        # At the same time: some step of one worker started before a step of the other had finished.
        a = [task for task in tasks if task.worker_ids == ["pair-a"]]
        b = [task for task in tasks if task.worker_ids == ["pair-b"]]
        assert any(x.started_at < y.finished_at and y.started_at < x.finished_at for x in a for y in b)
    finally:
        for worker in workers:
            worker.stop()

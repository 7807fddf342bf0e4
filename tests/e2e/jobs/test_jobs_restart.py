"""Jobs survive their processes: real Daphne and ``manage.py jobs_worker`` processes killed with
SIGKILL (as an out-of-memory kill or a lost machine would) while a job waits at a checkpoint, and
while one of its steps runs. The row is the truth, so after a restart the job goes on from where it
was, each decision is kept, and a step taken over runs again to reach its checkpoint exactly once."""

from __future__ import annotations

import httpx
import pytest

from jobs.models import JobState
from jobs.recovery import ABANDONED_EXCEPTION
from tests.e2e.harness import DaphneServer
from tests.e2e.jobs_engine_support import EngineJobs, engine_worker, executions, wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(django_db_blocker) -> EngineJobs:
    return EngineJobs(django_db_blocker)


def test_server_and_worker_killed_while_a_job_waits_lose_nothing(jobs, database_url, tmp_path):
    log = tmp_path / "executions.log"
    server = DaphneServer(database_url=database_url, log_path=tmp_path / "daphne.log")
    server.start()
    worker = engine_worker(env=server.env, tmp_path=tmp_path, worker_id="restart-a")
    try:
        job_id = jobs.start(log=str(log))
        jobs.wait([job_id], lambda job: job.state == JobState.WAITING)
        jobs.decide(job_id, "edit")
        jobs.wait([job_id], lambda job: job.state == JobState.WAITING and job.iteration == 1)

        worker.kill()
        server.kill()

        server.start()
        worker = engine_worker(env=server.env, tmp_path=tmp_path, worker_id="restart-b")
        assert httpx.get(f"{server.base_url}/health", timeout=10).status_code == 200
        waiting = jobs.get(job_id)
        assert (waiting.state, waiting.checkpoint_kind, waiting.iteration) == (JobState.WAITING, "review", 1)
        assert waiting.checkpoint == {"iteration": 1, "rounds": 2}

        jobs.decide(job_id, "edit")
        jobs.wait([job_id], lambda job: job.state == JobState.WAITING and job.iteration == 2)
        jobs.decide(job_id, "approve")
        done = jobs.get(job_id)
        assert done.state == JobState.COMPLETE
        assert done.result == {"rounds": 3}
        assert jobs.decisions(job_id) == [("edit", 0), ("edit", 1), ("approve", 2)]
        # One execution per step: nothing ran twice across the restart.
        assert [(step, iteration) for _, step, iteration, _ in executions(log)] == [
            ("work", 0),
            ("work", 1),
            ("work", 2),
        ]
    finally:
        worker.stop()
        server.stop()


def test_a_worker_killed_mid_step_is_taken_over_and_the_checkpoint_is_reached_once(jobs, server, tmp_path):
    log = tmp_path / "executions.log"
    first = engine_worker(env=server.env, tmp_path=tmp_path, worker_id="mid-step-a")
    second = None
    try:
        job_id = jobs.start(log=str(log), sleep="3")
        jobs.wait([job_id], lambda job: job.state == JobState.WAITING)
        jobs.decide(job_id, "edit")
        # The second step is running on the first worker (it wrote its line, holds the claim).
        wait_for(lambda: len(executions(log)) == 2, what="the second step started")
        running = jobs.get(job_id)
        assert running.state == JobState.RUNNING
        assert running.step_worker == "mid-step-a"
        abandoned_task = running.step_task_id

        first.kill()

        # A short lease: the new worker's recovery takes the step over within seconds.
        second = engine_worker(
            env=server.env, tmp_path=tmp_path, worker_id="mid-step-b", JOBS_STEP_LEASE_SECONDS="2"
        )
        job = jobs.wait([job_id], lambda job: job.state == JobState.WAITING, timeout=120)[0]

        assert job.iteration == 1
        # The checkpoint of the re-run step, once: rounds counts the steps whose outcome was stored.
        assert job.checkpoint == {"iteration": 1, "rounds": 2}
        assert jobs.decisions(job_id) == [("edit", 0)]
        runs = executions(log)
        assert [(step, iteration) for _, step, iteration, _ in runs] == [
            ("work", 0),
            ("work", 1),
            ("work", 1),
        ]
        assert runs[1][3] != runs[2][3], "the step was run again by another process"
        tasks = {str(task.id): task for task in jobs.tasks([job_id])}
        assert tasks[abandoned_task].status == "FAILED"
        assert tasks[abandoned_task].exception_class_path == ABANDONED_EXCEPTION
        assert [task.worker_ids for task in tasks.values()][-1] == ["mid-step-b"]

        jobs.decide(job_id, "approve")
        assert jobs.get(job_id).state == JobState.COMPLETE
        assert jobs.decisions(job_id) == [("edit", 0), ("approve", 1)]
        assert len(executions(log)) == 3
    finally:
        first.stop()
        if second is not None:
            second.stop()

"""A worker whose database connections are cut (PostgreSQL restarted, a failover, a network cut:
here ``pg_terminate_backend`` on the worker's own connections) stays up and goes on: cut while idle,
its next poll runs on a new connection; cut while a step runs, the outcome is written on a new
connection and the job reaches its checkpoint once. (A database error that does reach the worker's
loop starts the loop again: tests/jobs/test_worker_loop.py.)"""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.models import JobState
from tests.e2e.conftest import SERVER_DB_APPLICATION
from tests.e2e.jobs_engine_support import EngineJobs, engine_worker, executions, wait_for

pytestmark = pytest.mark.django_db

WORKER_DB_APPLICATION = "gatehouse-e2e-cut-worker"


@pytest.fixture
def jobs(django_db_blocker) -> EngineJobs:
    return EngineJobs(django_db_blocker)


def _cut(jobs: EngineJobs) -> int:
    """Terminate every connection of the worker; returns how many there were."""

    def terminate() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
                [WORKER_DB_APPLICATION],
            )
            return int(cursor.fetchone()[0])

    return jobs.db(terminate)


def test_a_worker_whose_connections_are_cut_survives_and_finishes_its_steps(jobs, server, tmp_path):
    log = tmp_path / "executions.log"
    url = server.env["DATABASE_URL"].replace(SERVER_DB_APPLICATION, WORKER_DB_APPLICATION)
    assert url != server.env["DATABASE_URL"]
    worker = engine_worker(env={**server.env, "DATABASE_URL": url}, tmp_path=tmp_path, worker_id="cut-worker")
    try:
        # Cut while idle.
        wait_for(lambda: _cut(jobs) > 0, what="the worker's connection")
        first = jobs.start(log=str(log))
        jobs.wait([first], lambda job: job.state == JobState.WAITING)

        # Cut while a step runs: its heartbeat and its outcome go through new connections.
        second = jobs.start(log=str(log), sleep="3")
        wait_for(lambda: len(executions(log)) == 2, what="the second job's step started")
        assert _cut(jobs) > 0
        job = jobs.wait([second], lambda job: job.state == JobState.WAITING)[0]

        assert job.checkpoint == {"iteration": 0, "rounds": 1}
        assert worker.process is not None
        assert worker.process.poll() is None, worker.log()
        assert [job_id for job_id, *_ in executions(log)] == [first, second]
        # The outcome was written on a new connection, after the cut one failed.
        assert "Database unreachable" in worker.log()
    finally:
        worker.stop()

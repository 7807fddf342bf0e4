"""Tool tasks run by real ``manage.py jobs_worker`` processes on PostgreSQL: a task completes with
its progress as the status message, a cancel stops a long call in the middle, and a worker killed
mid-call leaves the task to another worker, which finishes it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django_tasks_db.models import DBTaskResult

from jobs.models import Job
from jobs.tool_tasks import tool_task_cancel, tool_task_get, tool_task_update
from mcp_gateway.kernel.tool_tasks_2026_07_28 import ToolTask
from tests.jobs.tool_task_support import TOOL_TASK_TEST_QUEUE, identity_of, start, task_tools  # noqa: F401
from tests.jobs.worker_process import JobsWorkerProcess, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("task_tools")]

# Short, so a killed worker's step is taken over soon; heartbeats come every lease/4.
LEASE_SECONDS = 2
# Far longer than any wait below: a call that finished by itself would not prove the cancel.
LONG_SLEEP_SECONDS = 120
WAIT_SECONDS = 60


def _worker_env() -> dict[str, str]:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    where = f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    url = f"postgres://{db.get('USER') or 'postgres'}{password}@{where}"
    return {
        **os.environ,
        "DATABASE_URL": url,
        "SECRET_KEY": settings.SECRET_KEY,
        "GATEHOUSE_TOOLSETS": ",".join(settings.GATEHOUSE["GATEHOUSE_TOOLSETS"]),
        "MCP_TOOLSET_CACHE_SECONDS": "0",
        "JOBS_STEP_LEASE_SECONDS": str(LEASE_SECONDS),
        "JOBS_TOOL_TASK_QUEUE": TOOL_TASK_TEST_QUEUE,
        "RATE_LIMIT_TOOL": "none",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def workers(tmp_path) -> Iterator[Any]:
    started: list[JobsWorkerProcess] = []

    def make(name: str) -> JobsWorkerProcess:
        worker = JobsWorkerProcess(
            env=_worker_env(),
            log_path=tmp_path / f"{name}.log",
            worker_id=name,
            queue=TOOL_TASK_TEST_QUEUE,
        )
        worker.start()
        started.append(worker)
        return worker

    yield make
    for worker in started:
        worker.stop()


def _lines(log: Path) -> list[tuple[str, int]]:
    if not log.exists():
        return []
    return [(word, int(pid)) for word, pid in (line.split() for line in log.read_text().splitlines())]


def _status(me: Any, task: ToolTask) -> ToolTask:
    return tool_task_get(identity=me, task_id=task.task_id)


def test_a_worker_runs_the_task_and_its_progress_is_the_status_message(owner, workers, tmp_path):
    me = identity_of(owner)
    log = tmp_path / "calls.log"
    workers("tasks-a")
    task = start(me, "tt_sleep", {"seconds": 2, "log": str(log)})
    wait_until(
        lambda: _status(me, task).status_message == "Sleeping now.", timeout=WAIT_SECONDS, what="progress"
    )
    assert _status(me, task).status == "working"
    wait_until(lambda: _status(me, task).status == "completed", timeout=WAIT_SECONDS, what="completed")
    done = _status(me, task)
    assert done.result is not None
    assert done.result["content"][0]["text"] == "slept 2"
    assert [word for word, _ in _lines(log)] == ["start", "end"]


def test_input_rounds_work_across_workers(owner, workers):
    me = identity_of(owner)
    first = workers("tasks-first")
    task = start(me, "tt_ask", {"question": "Which region?"})
    wait_until(lambda: _status(me, task).status == "input_required", timeout=WAIT_SECONDS, what="input")
    first.stop()
    workers("tasks-second")
    tool_task_update(
        identity=me,
        task_id=task.task_id,
        input_responses={"answer": {"action": "accept", "content": {"answer": "EU"}}},
    )
    wait_until(lambda: _status(me, task).status == "completed", timeout=WAIT_SECONDS, what="completed")
    done = _status(me, task)
    assert done.result is not None
    assert done.result["content"][0]["text"] == "Which region? -> EU"


def test_a_cancel_stops_a_long_call_in_the_middle(owner, workers, tmp_path):
    me = identity_of(owner)
    log = tmp_path / "calls.log"
    workers("tasks-cancel")
    task = start(me, "tt_sleep", {"seconds": LONG_SLEEP_SECONDS, "log": str(log)})
    wait_until(lambda: bool(_lines(log)), timeout=WAIT_SECONDS, what="the call started")
    tool_task_cancel(identity=me, task_id=task.task_id)
    assert _status(me, task).status == "cancelled"
    step_task = Job.objects.get(pk=task.task_id).step_task_id
    # The worker's step returns long before the tool's sleep would have ended.
    wait_until(
        lambda: DBTaskResult.objects.get(pk=step_task).status == "SUCCESSFUL",
        timeout=WAIT_SECONDS,
        what="the step stopped",
    )
    assert _status(me, task).status == "cancelled"
    assert [word for word, _ in _lines(log)] == ["start"]
    # The worker is free again: the next task runs.
    after = start(me, "tt_echo", {"text": "next"})
    wait_until(lambda: _status(me, after).status == "completed", timeout=WAIT_SECONDS, what="next task")


def test_a_worker_killed_mid_call_leaves_the_task_to_another_that_finishes_it(owner, workers, tmp_path):
    me = identity_of(owner)
    log = tmp_path / "calls.log"
    doomed = workers("tasks-doomed")
    task = start(me, "tt_sleep", {"seconds": 3, "log": str(log)})
    wait_until(lambda: bool(_lines(log)), timeout=WAIT_SECONDS, what="the call started")
    doomed.kill()
    assert _status(me, task).status == "working"
    survivor = workers("tasks-survivor")
    try:
        wait_until(
            lambda: _status(me, task).status == "completed", timeout=WAIT_SECONDS, what="completed elsewhere"
        )
    except AssertionError:
        job = Job.objects.get(pk=task.task_id)
        raise AssertionError(
            f"{job.state} {job.step} {job.step_worker} {job.step_attempts} {job.error} {job.result} "
            f"{_lines(log)}\n{survivor.log()[-6000:]}"
        ) from None
    lines = _lines(log)
    assert [word for word, _ in lines] == ["start", "start", "end"]
    assert lines[0][1] != lines[1][1]
    assert lines[1][1] == lines[2][1]
    done = _status(me, task)
    assert done.result is not None
    assert done.result["content"][0]["text"] == "slept 3"

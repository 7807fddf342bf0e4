"""Several processes on one PostgreSQL database without ``REDIS_URL`` each count limits alone: every
process after the first says so at start, and a process that crashed is not counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.ratelimit.processes import SEVERAL_PROCESSES
from tests.e2e.harness import DaphneServer

pytestmark = pytest.mark.django_db

WARNING_START = SEVERAL_PROCESSES.split(":")[0]


def _start(database_url: str, tmp_path: Path, name: str) -> DaphneServer:
    # REDIS_URL empty is unset: the limits are counted in the process's memory.
    server = DaphneServer(
        database_url=database_url, log_path=tmp_path / f"{name}.log", extra_env={"REDIS_URL": ""}
    )
    server.start()
    return server


def test_the_second_process_without_redis_warns_and_none_warns_after_a_crash(demo, database_url, tmp_path):
    first = _start(database_url, tmp_path, "first")
    second: DaphneServer | None = None
    try:
        second = _start(database_url, tmp_path, "second")
        assert WARNING_START not in first.log()
        assert WARNING_START in second.log()
        assert SEVERAL_PROCESSES.format(others=1) in second.log()
    finally:
        # Killed, not stopped: a crash leaves nothing behind that a later process would count.
        first.kill()
        if second is not None:
            second.kill()
    alone = _start(database_url, tmp_path, "alone")
    try:
        assert WARNING_START not in alone.log()
    finally:
        alone.stop()

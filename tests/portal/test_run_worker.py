"""`make run`'s jobs worker (portal.run_worker): ``prepare_run --serve`` starts one beside Daphne,
it runs job steps, and the two stop together: stopping the server stops the worker, the worker's
death stops the server, and the server's SIGKILL leaves no orphan worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from jobs.models import Job, JobState
from jobs.services import job_start
from tests.jobs.engine_kind import ENGINE_TEST_KIND, engine_kind_register
from tests.jobs.worker_process import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STRONG_PASSWORD = "run-worker-test-Passw0rd-long"


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class RunProcess:
    def __init__(self, tmp_path: Path) -> None:
        db = connection.settings_dict
        self.port = _free_port()
        self.log_path = tmp_path / "run.log"
        env = {key: value for key, value in os.environ.items() if key not in {"PORT", "DEMO_LLM_MODEL"}}
        env.update(
            DATABASE_URL=f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:"
            f"{db.get('PORT') or 5432}/{db['NAME']}",
            DJANGO_SETTINGS_MODULE="tests.jobs.run_settings",
            RUN_TEST_LOCAL_DIR=str(tmp_path),
            DEMO_PASSWORD=STRONG_PASSWORD,
            PYTHONUNBUFFERED="1",
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "prepare_run", "--serve", "--port", str(self.port)],
                cwd=settings.BASE_DIR,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # As from a terminal: a run started in the background of a shell inherits SIGINT
                # ignored, and Python and Twisted then leave it ignored, so Ctrl-C would do nothing.
                preexec_fn=_sigint_default,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def worker_pid(self) -> int:
        """The jobs worker: this process's child running ``manage.py jobs_worker``."""
        found: list[int] = []

        def child() -> bool:
            found[:] = [pid for pid in _children(self.process.pid) if b"jobs_worker" in _cmdline(pid)]
            return bool(found)

        wait_until(child, timeout=60, what=f"a jobs worker child:\n{self.log()}")
        return found[0]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _children(pid: int) -> list[int]:
    done = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(line) for line in done.stdout.split()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead; only its parent's wait would reap it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def run(tmp_path):
    started = RunProcess(tmp_path)
    yield started
    started.stop()


def _job_reaches_its_checkpoint(owner) -> None:
    engine_kind_register()
    job = job_start(tenant_id=owner.tenant_id, user_id=owner.user_id, kind=ENGINE_TEST_KIND, job_input={})
    wait_until(
        lambda: Job.objects.get(pk=job.pk).state == JobState.WAITING, timeout=60, what="the first checkpoint"
    )


def test_the_worker_runs_steps_and_sigterm_on_the_server_stops_both(run, owner):
    worker = run.worker_pid()
    wait_until(run.healthy, timeout=60, what=f"the server:\n{run.log()}")

    _job_reaches_its_checkpoint(owner)

    run.process.send_signal(signal.SIGTERM)
    assert run.process.wait(timeout=60) == 0, run.log()
    assert not _alive(worker)


def test_ctrl_c_stops_both(run, owner):
    worker = run.worker_pid()
    wait_until(run.healthy, timeout=60, what=f"the server:\n{run.log()}")

    # A terminal's Ctrl-C reaches the whole foreground group: the server and its worker.
    run.process.send_signal(signal.SIGINT)
    os.kill(worker, signal.SIGINT)
    run.process.wait(timeout=60)
    assert not _alive(worker)


def test_a_dead_worker_stops_the_server(run):
    worker = run.worker_pid()
    wait_until(run.healthy, timeout=60, what=f"the server:\n{run.log()}")

    os.kill(worker, signal.SIGKILL)

    assert run.process.wait(timeout=60) == 1, run.log()
    assert "The jobs worker exited" in run.log()
    assert not run.healthy()


def test_a_killed_server_leaves_no_orphan_worker(run):
    worker = run.worker_pid()
    wait_until(run.healthy, timeout=60, what=f"the server:\n{run.log()}")

    run.process.kill()
    run.process.wait()

    wait_until(lambda: not _alive(worker), timeout=60, what="the orphan worker to stop")
    assert "The parent process is gone" in run.log()

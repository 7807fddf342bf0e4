"""The jobs worker that ``make run`` starts beside Daphne, and stops with it.

One command starts the whole product, so the job steps (``manage.py jobs_worker``) run in a child
process of ``prepare_run --serve``: the same environment, so the same database (SQLite file or
PostgreSQL). They live and die together:

- Daphne stops (Ctrl-C, SIGTERM from ``make``'s own handling): the worker is sent SIGTERM (it ends
  its current step first), then killed if it has not exited within ``WORKER_STOP_SECONDS`` (the
  step is then run again by the recovery at the next start);
- the worker dies: a watcher thread sends this process SIGTERM, which stops Daphne the way Ctrl-C
  does, and ``make run`` exits 1;
- this process dies, even by SIGKILL: the worker's standard input is a pipe only this process
  holds; when it closes the worker stops itself (``--stop-with-parent``). A pipe instead of
  Linux's parent-death signal, so it works wherever Python does.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from django.conf import settings

from jobs.management.commands.jobs_worker import POLL_INTERVAL_SECONDS

logger = logging.getLogger(__name__)

WORKER_STOP_SECONDS = 20.0


@dataclass
class RunWorker:
    process: subprocess.Popen[bytes]
    stopping: threading.Event = field(default_factory=threading.Event)
    died: threading.Event = field(default_factory=threading.Event)


def run_worker_start() -> RunWorker:
    """``manage.py jobs_worker`` as a child of this process, watched (see the module docstring)."""
    # Our own interpreter and manage.py, no shell: nothing from outside reaches the command line.
    process = subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            str(settings.BASE_DIR / "manage.py"),
            "jobs_worker",
            "--interval",
            str(POLL_INTERVAL_SECONDS),
            # The one worker of a one-machine install takes every job kind's queue.
            "--queue-name",
            "*",
            "--stop-with-parent",
        ],
        cwd=settings.BASE_DIR,
        stdin=subprocess.PIPE,
    )
    worker = RunWorker(process=process)
    threading.Thread(target=_watch, args=(worker,), name="jobs-worker-watch", daemon=True).start()
    return worker


def run_worker_stop(worker: RunWorker) -> None:
    worker.stopping.set()
    process = worker.process
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=WORKER_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            logger.warning("The jobs worker did not stop within %.0f s; killed", WORKER_STOP_SECONDS)
            process.kill()
            process.wait()
    if process.stdin is not None:
        process.stdin.close()


def _watch(worker: RunWorker) -> None:
    code = worker.process.wait()
    if worker.stopping.is_set():
        return
    worker.died.set()
    sys.stderr.write(f"The jobs worker exited (code {code}); stopping the server.\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGTERM)

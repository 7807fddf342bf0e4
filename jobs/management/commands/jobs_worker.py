"""``manage.py jobs_worker``: a task-queue worker for job steps, with the recovery of steps whose
worker died.

It is django-tasks-db's ``db_worker`` (the same options: ``--queue-name``, ``--interval``,
``--batch``, ``--max-tasks``, ``--worker-id``...), plus a thread that runs ``jobs.recovery`` at
start and every ``JOBS_STEP_LEASE_SECONDS / 2`` (and deletes MCP tool tasks past their ttl every
few minutes, ``jobs.tool_tasks.tool_tasks_expire``), a thread that rolls finished days of tool calls up
for the console's overview (``core.audit.rollup``) at start and every ``ROLLUP_INTERVAL_SECONDS``,
and two changes:

- a database that goes away does not end it: db_worker's loop lets any database error other than a
  locked SQLite file out, which would stop the process; here the loop starts again on a new
  connection after a pause, and the job rows (claims, leases) sort out whatever was half done;
- ``--stop-with-parent``: the process that started it holds its standard input; when that closes
  (the parent exited, even by SIGKILL) the worker shuts down as on SIGTERM. ``make run`` uses it,
  and it needs no Linux-only parent-death signal.

Run any number, on any machine that reaches the database; ``make run`` starts one beside Daphne.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import CommandError
from django.db import DatabaseError, connection
from django.utils import timezone
from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand
from django_tasks_db.management.commands.db_worker import Worker

from core.audit.rollup.services import ROLLUP_INTERVAL_SECONDS, tool_call_days_roll_up
from core.conf import gatehouse_settings
from jobs.recovery import jobs_recover
from jobs.steps import worker_id_set
from jobs.tool_tasks import EXPIRE_INTERVAL_SECONDS, tool_tasks_expire

logger = logging.getLogger("jobs.worker")

RESTART_DELAY_MAX_SECONDS = 10.0
# How long an idle worker sleeps between looks at the queue: db_worker's default of a second would
# be most of every step's wait, and the tools read the job row every 0.25 s, so a shorter sleep gains
# nothing (benchmarks/job_latency.py, docs/benchmarks.md). The price is one indexed SELECT ... FOR
# UPDATE SKIP LOCKED per interval per idle worker: 5 a second.
POLL_INTERVAL_SECONDS = 0.2


class JobsWorker(Worker):
    """db_worker's loop, started again after a database error instead of ending the process."""

    def run(self) -> None:
        delay = 0.5
        while True:
            try:
                super().run()
                return
            except DatabaseError:
                if not self.running:
                    return
                logger.warning(
                    "The database failed under the worker; starting again in %.1fs", delay, exc_info=True
                )
                connection.close()
                time.sleep(delay)
                delay = min(delay * 2, RESTART_DELAY_MAX_SECONDS)


class Command(DbWorkerCommand):
    help = "Run job steps from the task queue (any number, on any machine); recover dead workers' steps."

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        # The reloader restarts the worker mid-step on any file change; never here.
        parser.set_defaults(reload=False)
        parser.set_defaults(interval=POLL_INTERVAL_SECONDS)
        # Readable in the job rows (step_worker) and the task rows: which machine, which process.
        parser.set_defaults(worker_id=f"{socket.gethostname()[:40]}:{os.getpid()}")
        parser.add_argument(
            "--stop-with-parent",
            action="store_true",
            help="Shut down when standard input closes: the parent that started this worker holds it.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.configure_logging(options["verbosity"])
        if options["reload"]:
            logger.warning("--reload is not supported by jobs_worker (it would restart steps); ignored")
        worker_id_set(options["worker_id"])
        queue_names = options["queue_name"].split(",")
        excluded = options["exclude_queues"].split(",") if options["exclude_queues"] else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = JobsWorker(
            queue_names=queue_names,
            interval=options["interval"],
            batch=options["batch"],
            backend_name=options["backend_name"],
            startup_delay=options["startup_delay"],
            max_tasks=options["max_tasks"],
            worker_id=options["worker_id"],
            excluded_queue_names=excluded,
        )
        if options["stop_with_parent"]:
            threading.Thread(target=_stop_when_stdin_closes, name="jobs-parent-watch", daemon=True).start()
        stop = threading.Event()
        recovery = threading.Thread(target=_recover_forever, args=(stop,), name="jobs-recovery", daemon=True)
        recovery.start()
        threading.Thread(target=_roll_up_forever, args=(stop,), name="audit-rollup", daemon=True).start()
        try:
            worker.configure_signals()
            worker.run()
        finally:
            stop.set()


def _stop_when_stdin_closes() -> None:
    # os.read, not sys.stdin: a daemon thread blocked in a buffered reader's lock aborts the
    # interpreter when it shuts down.
    try:
        while os.read(sys.stdin.fileno(), 1024):
            pass
    except (OSError, ValueError):
        pass
    logger.warning("The parent process is gone; the worker stops")
    os.kill(os.getpid(), signal.SIGTERM)


def _recover_forever(stop: threading.Event) -> None:
    interval = max(0.5, gatehouse_settings.JOBS_STEP_LEASE_SECONDS / 2)
    expired_at = 0.0
    try:
        while True:
            try:
                recovered = jobs_recover()
                if recovered:
                    logger.warning("Enqueued again %d step(s) whose worker stopped", recovered)
                if time.monotonic() - expired_at >= EXPIRE_INTERVAL_SECONDS:
                    expired_at = time.monotonic()
                    expired = tool_tasks_expire()
                    if expired:
                        logger.info("Expired %d tool task(s) past their ttl", expired)
            except Exception:
                # A dead database, a locked SQLite file: try again next round.
                logger.warning("Recovering job steps failed; trying again", exc_info=True)
                connection.close()
            if stop.wait(interval):
                return
    finally:
        connection.close()


def _roll_up_forever(stop: threading.Event) -> None:
    # A thread of its own: the first roll-up of a busy database takes seconds, which must not delay
    # the recovery of steps.
    try:
        while True:
            try:
                tool_call_days_roll_up(now=timezone.now())
            except Exception:
                logger.warning("Rolling up the audit's tool calls failed; trying again", exc_info=True)
                connection.close()
            if stop.wait(ROLLUP_INTERVAL_SECONDS):
                return
    finally:
        connection.close()

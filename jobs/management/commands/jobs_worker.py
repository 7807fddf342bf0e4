"""``manage.py jobs_worker``: a task-queue worker for job steps, with the recovery of steps whose
worker died.

It is django-tasks-db's ``db_worker`` (the same options: ``--queue-name``, ``--interval``,
``--batch``, ``--max-tasks``, ``--worker-id``...), plus a thread that runs ``jobs.recovery`` at
start and every ``JOBS_STEP_LEASE_SECONDS / 2``. Run any number, on any machine that reaches the
database; ``make run`` starts one beside Daphne.
"""

from __future__ import annotations

import logging
import threading
from argparse import ArgumentParser
from typing import Any

from django.db import connection
from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand

from core.conf import gatehouse_settings
from jobs.recovery import jobs_recover
from jobs.steps import worker_id_set

logger = logging.getLogger("jobs.worker")


class Command(DbWorkerCommand):
    help = "Run job steps from the task queue (any number, on any machine); recover dead workers' steps."

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        # The reloader restarts the worker mid-step on any file change; never by default here.
        parser.set_defaults(reload=False)

    def handle(self, *args: Any, **options: Any) -> None:
        worker_id_set(options["worker_id"])
        stop = threading.Event()
        recovery = threading.Thread(target=_recover_forever, args=(stop,), name="jobs-recovery", daemon=True)
        recovery.start()
        try:
            super().handle(*args, **options)
        finally:
            stop.set()


def _recover_forever(stop: threading.Event) -> None:
    interval = max(0.5, gatehouse_settings.JOBS_STEP_LEASE_SECONDS / 2)
    try:
        while True:
            try:
                recovered = jobs_recover()
                if recovered:
                    logger.warning("Enqueued again %d step(s) whose worker stopped", recovered)
            except Exception:
                # A dead database, a locked SQLite file: try again next round.
                logger.warning("Recovering job steps failed; trying again", exc_info=True)
                connection.close()
            if stop.wait(interval):
                return
    finally:
        connection.close()

"""``manage.py audit_spool_replay``: store the audit rows waiting in ``AUDIT_SPOOL_DIR`` now.

Servers replay the spool by themselves once the database answers again; this is for an operator
who wants it done at once (after an outage, before retiring a host, or on a spool directory copied
from a host that is gone: ``--dir``). Safe to run at any time, alongside the servers, and twice.
Exits non-zero when files are still waiting (the database went away again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit.spool import audit_spool_pending, audit_spool_replay, spool_dir


class Command(BaseCommand):
    help = "Replay the audit rows spooled while the database was unreachable."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dir", type=Path, help="A spool directory other than AUDIT_SPOOL_DIR.")

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["dir"] or spool_dir()
        stored = audit_spool_replay(directory=directory)
        self.stdout.write(f"{stored} audit row(s) replayed from {directory}.")
        waiting = audit_spool_pending(directory=directory)
        if waiting:
            raise CommandError(f"{waiting} spool file(s) still waiting: is the database reachable?")

"""``manage.py audit_rollup``: roll finished days of tool calls up now (``core.audit.rollup``).

Every ``jobs_worker`` does it by itself every few minutes; this is for operators and cron: after a
spool from a host that was gone for longer than the rollup's window was replayed (``--days`` to
reach its days), or on a deployment that runs no worker. Safe alongside the workers and twice.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from core.audit.rollup.services import ROLLUP_DAYS, tool_call_days_roll_up

DAYS_MAX = 3660


class Command(BaseCommand):
    help = "Roll up the tool calls of finished UTC days for the console's overview."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=ROLLUP_DAYS,
            help=f"How many finished days back to look (default {ROLLUP_DAYS}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days: int = options["days"]
        if not 1 <= days <= DAYS_MAX:
            raise CommandError(f"--days must be between 1 and {DAYS_MAX}.")
        rolled = tool_call_days_roll_up(now=timezone.now(), days=days)
        if rolled:
            self.stdout.write(f"Rolled up {len(rolled)} day(s), {rolled[0]} to {rolled[-1]}.")
        else:
            self.stdout.write(f"Nothing to roll up: the last {days} finished day(s) are up to date.")

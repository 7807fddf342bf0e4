from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from mcp_gateway.kernel.retention import retention_purge


class Command(BaseCommand):
    help = (
        "End MCP sessions idle for longer than MCP_SESSION_IDLE_SECONDS, delete ended sessions older "
        "than MCP_SESSION_RETENTION_SECONDS and audit events older than AUDIT_RETENTION_DAYS. Each "
        "server process also purges sessions periodically; schedule this for the audit trail."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Report what would go; change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        dry_run = options["dry_run"]
        counts = retention_purge(dry_run=dry_run)
        verb = ("would end", "would delete") if dry_run else ("ended", "deleted")
        self.stdout.write(
            f"Sessions: {verb[0]} {counts.sessions_ended} idle, {verb[1]} {counts.sessions_deleted} old. "
            f"Audit events: {verb[1]} {counts.audit_deleted} older than the retention period."
        )

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from mcp_gateway.sessions import session_purge


class Command(BaseCommand):
    help = (
        "End MCP sessions idle for longer than MCP_SESSION_IDLE_SECONDS and delete ended sessions older "
        "than MCP_SESSION_RETENTION_SECONDS. Each server process also does this periodically."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        ended, deleted = session_purge()
        self.stdout.write(f"Ended {ended} idle session(s); deleted {deleted} old session(s).")

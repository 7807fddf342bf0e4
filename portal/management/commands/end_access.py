from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.selectors import user_get
from core.errors import GatehouseError
from portal.access import person_access_end


class Command(BaseCommand):
    help = (
        "End everything a person holds at once: their OAuth tokens in every tenant, their MCP "
        "sessions and their signed-in browsers; --deactivate also turns the account off."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--deactivate", action="store_true", help="Also turn the account off: no sign-in of any kind."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = user_get(username=options["username"])
        except GatehouseError as exc:
            raise CommandError(exc.message) from exc
        ended = person_access_end(user=user, deactivate=options["deactivate"])
        off = " The account is turned off." if ended.deactivated else ""
        self.stdout.write(
            f"Ended {user.username}'s access: {ended.access_tokens} access token(s), "
            f"{ended.refresh_tokens} refresh token(s), {ended.mcp_sessions} MCP session(s), "
            f"{ended.browser_sessions} browser session(s).{off}"
        )

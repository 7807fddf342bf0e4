"""``manage.py mcp_token USER --tenant T``: an access token for the MCP endpoint, without a browser.

The token alone goes to standard output, so ``TOKEN=$(python manage.py mcp_token ...)`` works;
what it allows and when it expires go to standard error. Issuing is ``oauth.cli_tokens``.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import GatehouseError
from oauth.cli_tokens import (
    CLI_CLIENT_NAME,
    CLI_TOKEN_DEFAULT_MINUTES,
    CLI_TOKEN_MAX_MINUTES,
    access_token_issue_for_cli,
)


class Command(BaseCommand):
    help = (
        f"Issue an access token for the MCP endpoint to a person in one tenant, from the "
        f'"{CLI_CLIENT_NAME}" client. Prints the token once; it is stored only as its checksum.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--tenant", required=True, help="The tenant's slug; the person must be a member.")
        parser.add_argument(
            "--scopes",
            nargs="+",
            help="Scopes to grant (space- or comma-separated). Default: everything the person's role "
            "allows; more than that is refused.",
        )
        parser.add_argument(
            "--minutes",
            type=int,
            default=CLI_TOKEN_DEFAULT_MINUTES,
            help=f"How long the token works (default {CLI_TOKEN_DEFAULT_MINUTES}, "
            f"at most {CLI_TOKEN_MAX_MINUTES}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = None
        if options["scopes"] is not None:
            scopes = [scope for value in options["scopes"] for scope in re.split(r"[\s,]+", value) if scope]
        try:
            issued = access_token_issue_for_cli(
                username=options["username"],
                tenant_slug=options["tenant"],
                scopes=scopes,
                minutes=options["minutes"],
            )
        except GatehouseError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(
            f"Access token for {issued.username} in {issued.tenant_slug}, scopes {' '.join(issued.scopes)}, "
            f"expires {issued.expires.isoformat(timespec='seconds')}. Send it to {issued.resource} as "
            f'"Authorization: Bearer <token>". It is shown once, below, and stored only as a checksum:'
        )
        self.stdout.write(issued.token)

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.conf import gatehouse_settings
from oauth.clients import unused_clients_purge

DAYS_TOO_FEW = "--days must be at least 1."


class Command(BaseCommand):
    help = (
        "Delete OAuth clients registered dynamically or through a client ID metadata document that "
        "never obtained a token in the given number of days (default OAUTH_UNUSED_CLIENT_DAYS). "
        "Manually created clients are never deleted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=gatehouse_settings.OAUTH_UNUSED_CLIENT_DAYS,
            help="Registered at least this many days ago.",
        )
        parser.add_argument("--dry-run", action="store_true", help="List what would go; delete nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        days, dry_run = options["days"], options["dry_run"]
        if days < 1:
            raise CommandError(DAYS_TOO_FEW)
        purged = unused_clients_purge(days=days, dry_run=dry_run)
        for client in purged:
            self.stdout.write(
                f"{client.client_id}\t{client.registration_source}\t{client.created:%Y-%m-%d}\t{client.name}"
            )
        verb = "Would delete" if dry_run else "Deleted"
        self.stdout.write(f"{verb} {len(purged)} unused client(s) registered more than {days} day(s) ago.")

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.selectors import tenant_get, user_get
from core.errors import GatehouseError
from oauth.services import BY_OPERATOR_COMMAND, tokens_revoke_for_user


class Command(BaseCommand):
    help = (
        "Revoke a user's OAuth access and refresh tokens (in every tenant, or in one with --tenant). "
        "Their MCP clients must sign in again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--tenant", help="Only the tokens for this tenant (its slug).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = user_get(username=options["username"])
            tenant = tenant_get(slug=options["tenant"]) if options["tenant"] else None
        except GatehouseError as exc:
            raise CommandError(exc.message) from exc
        counts = tokens_revoke_for_user(user=user, tenant=tenant, by=BY_OPERATOR_COMMAND)
        where = f" in {tenant.slug}" if tenant else ""
        self.stdout.write(
            f"Revoked {counts.access} access token(s) and {counts.refresh} refresh token(s) "
            f"of {user.username}{where}."
        )

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Role
from accounts.selectors import tenant_get, user_get
from accounts.services import membership_set
from core.errors import GatehouseError


class Command(BaseCommand):
    help = "Add a user to a tenant with a role, or change the role of an existing member."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("--role", required=True, choices=Role.values)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = user_get(username=options["username"])
            tenant = tenant_get(slug=options["tenant"])
        except GatehouseError as exc:
            raise CommandError(exc.message) from exc
        membership, created = membership_set(user=user, tenant=tenant, role=Role(options["role"]))
        verb = "Added" if created else "Updated"
        self.stdout.write(f"{verb}: {user.username} is {membership.role} in {tenant.slug}.")

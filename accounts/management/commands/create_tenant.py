from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import tenant_create
from core.errors import GatehouseError


class Command(BaseCommand):
    help = "Create a tenant. Safe to run twice: an existing tenant is left as it is."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="Letters, digits, hyphens and underscores; used in URLs and logs.")
        parser.add_argument("--name", required=True, help="The name people see.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tenant, created = tenant_create(slug=options["slug"], name=options["name"])
        except GatehouseError as exc:
            raise CommandError(exc.message) from exc
        if created:
            self.stdout.write(f"Created tenant {tenant.slug} ({tenant.name}).")
        else:
            self.stdout.write(f"Tenant {tenant.slug} ({tenant.name}) already exists; left unchanged.")

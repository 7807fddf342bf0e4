from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from core.errors import NotFound
from workflows.services import workflow_export


class Command(BaseCommand):
    help = "Print a tenant's workflow as YAML that import_workflow reads back."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        try:
            self.stdout.write(workflow_export(tenant=tenant), ending="")
        except NotFound as exc:
            raise CommandError(exc.message) from exc

"""``manage.py toolsets enable|disable|list <tenant> [toolset]``: an operator's switch, the same
service call as the console's and the admin's (``toolset_set_enabled``), audited as made by
"manage.py toolsets"."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolset_set_enabled, toolsets_enabled

# Who the audit row names: nobody signed in, so the tool that made the switch.
VIA = "manage.py toolsets"


class Command(BaseCommand):
    help = "Enable, disable or list the toolsets a tenant's MCP clients can use."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["enable", "disable", "list"])
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("toolset", nargs="?", help="The toolset's name (enable and disable).")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        registry = default_registry()
        action, name = options["action"], options["toolset"]
        if action == "list":
            enabled = toolsets_enabled(tenant_id=tenant.pk, registry=registry)
            for toolset in registry.toolsets:
                state = "enabled " if toolset.name in enabled else "disabled"
                self.stdout.write(f"{state}  {toolset.name}  {toolset.description}")
            return
        if not name:
            raise CommandError(f"Name the toolset to {action}.")
        try:
            changed = toolset_set_enabled(
                tenant=tenant, toolset=name, enabled=action == "enable", registry=registry, by=None, via=VIA
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{name} {action}d for {tenant.slug}."
            if changed
            else f"{name} was already {action}d for {tenant.slug}."
        )

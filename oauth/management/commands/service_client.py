"""Operators' way to create, list and delete service clients (``oauth.service_clients``)."""

from __future__ import annotations

import shlex
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from accounts.models import Role
from accounts.selectors import tenant_get
from core.errors import GatehouseError
from oauth.service_clients import (
    service_client_create,
    service_client_delete,
    service_client_get,
    service_client_list,
    service_client_role,
)


def token_request_example(*, client_id: str) -> list[str]:
    """The shell lines that get an API token with this client's credentials, the secret read from
    the terminal into a variable and handed to curl on its standard input (``-K -``): never on a
    command line, where ``ps`` and the shell's history would show it. ``printf`` is the shell's own,
    so no process is started with it either."""
    token_url = shlex.quote(f"{settings.PUBLIC_URL}{reverse('oauth2_provider:token')}")
    resource = shlex.quote(f"resource={settings.API_RESOURCE_URL}")
    return [
        "read -rs CLIENT_SECRET   # paste the secret, then press Enter",
        f'printf \'user = "%s:%s"\\n\' {shlex.quote(client_id)} "$CLIENT_SECRET" | curl -s -K - '
        f"-d grant_type=client_credentials --data-urlencode {resource} {token_url}",
    ]


class Command(BaseCommand):
    help = (
        "Manage service clients: a tenant's server-side applications, which get API tokens with the "
        "client-credentials grant. `create TENANT NAME [--role ROLE]` prints the secret once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Create a service client for a tenant (its slug).")
        create.add_argument("tenant")
        create.add_argument("name")
        create.add_argument("--role", default=Role.CONTRIBUTOR.value, help="admin, contributor or viewer.")
        listing = actions.add_parser("list", help="List service clients (of one tenant, if given).")
        listing.add_argument("tenant", nargs="?")
        delete = actions.add_parser("delete", help="Delete a service client and revoke its tokens.")
        delete.add_argument("client_id")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"handle_{options['action']}")(**options)
        except GatehouseError as exc:
            raise CommandError(exc.message) from exc

    def handle_create(self, *, tenant: str, name: str, role: str, **options: Any) -> None:
        service_client, secret = service_client_create(tenant=tenant_get(slug=tenant), name=name, role=role)
        client_id = service_client.application.client_id
        self.stdout.write(f"Created service client {service_client.application.name!r} in {tenant}.")
        self.stdout.write(f"client_id:     {client_id}")
        self.stdout.write(f"client_secret: {secret}")
        self.stdout.write(
            "The secret is shown only now; store it safely. Get a token (the secret stays off the "
            "command line, where ps and the shell's history would see it):"
        )
        for line in token_request_example(client_id=client_id):
            self.stdout.write(f"  {line}")

    def handle_list(self, *, tenant: str | None, **options: Any) -> None:
        rows = service_client_list(tenant=tenant_get(slug=tenant) if tenant else None)
        for service_client in rows:
            role = service_client_role(service_client=service_client) or "(no membership)"
            self.stdout.write(
                f"{service_client.application.client_id}\t{service_client.tenant.slug}\t{role}\t"
                f"{service_client.application.name}\t{service_client.created.isoformat()}"
            )

    def handle_delete(self, *, client_id: str, **options: Any) -> None:
        service_client = service_client_get(client_id=client_id)
        name = service_client.application.name
        service_client_delete(service_client=service_client)
        self.stdout.write(f"Deleted service client {name!r} ({client_id}) and revoked its tokens.")

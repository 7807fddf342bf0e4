"""``manage.py mcp_stdio --user U --tenant T``: one person's MCP session over stdin and stdout, for a
desktop client that starts a local process (``mcp_gateway.transport.stdio``; docs/stdio.md).

Stdout carries protocol only, from the moment the command starts (``core.stdio_wire``): Django's
own output (system checks, errors) and every log line go to stderr. A refusal (no such user or
tenant, not a member, disabled, deactivated, scopes the role does not hold) exits with status 2
and writes only to stderr.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from core.errors import GatehouseError
from core.stdio_wire import stdout_reserve
from mcp_gateway.transport.stdio import stdio_identity_for_start, stdio_serve

REFUSED_EXIT_CODE = 2


class Command(BaseCommand):
    help = "Serve one person's MCP tools over stdio, for a desktop client that starts a local process."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="The person's username.")
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument(
            "--scopes",
            help="Space- or comma-separated scopes to act with (default: all of the role's).",
        )

    def execute(self, *args: Any, **options: Any) -> Any:
        # Before the system checks run: whatever Django writes goes to stderr, never to the client.
        self.wire = stdout_reserve()
        self.stdout = OutputWrapper(sys.stderr)
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        narrow_to = _scopes(options["scopes"])
        try:
            stdio_identity_for_start(
                username=options["user"], tenant_slug=options["tenant"], narrow_to=narrow_to
            )
        except GatehouseError as error:
            raise CommandError(error.message, returncode=REFUSED_EXIT_CODE) from error
        anyio.run(
            lambda: stdio_serve(
                username=options["user"], tenant_slug=options["tenant"], narrow_to=narrow_to, wire=self.wire
            )
        )


def _scopes(raw: str | None) -> frozenset[str] | None:
    if raw is None:
        return None
    scopes = frozenset(raw.replace(",", " ").split())
    if not scopes:
        raise CommandError("--scopes names no scope.", returncode=REFUSED_EXIT_CODE)
    return scopes

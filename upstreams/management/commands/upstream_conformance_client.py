"""The client under test of ``conformance client --command``: the suite appends its scenario
server's URL and passes the scenario's name and context in the environment
(``upstreams.conformance_client``). Exits 0 when every step worked, 1 otherwise."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from upstreams.conformance_client import conformance_client_run, conformance_context


class Command(BaseCommand):
    help = (
        "Run Gatehouse's upstream client against a conformance scenario's server: register a "
        "temporary upstream of the conformance tenant, list, call and read, then remove it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url", help="The scenario server's URL (the suite appends it).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            context = conformance_context(os.environ.get("MCP_CONFORMANCE_CONTEXT", ""))
        except ValueError as error:
            raise CommandError(f"MCP_CONFORMANCE_CONTEXT is not JSON: {error}") from None
        run = conformance_client_run(
            url=options["url"],
            scenario=os.environ.get("MCP_CONFORMANCE_SCENARIO", ""),
            context=context,
        )
        for line in run.lines:
            self.stdout.write(line)
        if run.failed:
            raise CommandError("the conformance client run failed")

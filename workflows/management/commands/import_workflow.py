from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from workflows.demo import workflow_toolset_ensure
from workflows.importing import SOURCE_MAX_CHARS
from workflows.services import WorkflowImportFailed, workflow_import


class Command(BaseCommand):
    help = "Replace a tenant's workflow with the one in a YAML file (all or nothing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("file", help="The workflow's YAML file.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        name = options["file"]
        try:
            # One byte past the limit (UTF-8 is at least a byte a character) is enough to refuse.
            with Path(name).open("rb") as file:
                raw = file.read(SOURCE_MAX_CHARS * 4 + 1)
        except OSError as exc:
            raise CommandError(f"{name}: cannot read: {exc.strerror}.") from exc
        try:
            source = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise CommandError(f"{name}:{line}: the file is not UTF-8 (byte {exc.start + 1}).") from exc
        try:
            workflow = workflow_import(tenant=tenant, source=source)
        except WorkflowImportFailed as exc:
            for problem in exc.problems:
                self.stderr.write(f"{name}:{problem.line}: {problem.message}")
            raise CommandError(f"{name}: nothing imported ({len(exc.problems)} problem(s)).") from exc
        contexts = list(workflow.contexts.all())
        commands = sum(context.commands.count() for context in contexts)
        self.stdout.write(
            f"Imported {workflow.name!r} for {tenant.slug}: {len(contexts)} contexts, {commands} commands."
        )
        if workflow_toolset_ensure(tenant=tenant):
            self.stdout.write(f"The workflows toolset is now on for {tenant.slug}.")

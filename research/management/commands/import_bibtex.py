from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from core.errors import InvalidInput
from research.bibtex import BIBTEX_MAX_BYTES, bibtex_bytes_decode, library_import_bibtex


class Command(BaseCommand):
    help = "Add a BibTeX file's entries to a tenant's library (by DOI, else by title; safe to run twice)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="The tenant's slug.")
        parser.add_argument("file", help="The .bib file, or - for standard input.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        name = options["file"]
        try:
            # One byte past the limit is enough to refuse.
            if name == "-":
                raw = sys.stdin.buffer.read(BIBTEX_MAX_BYTES + 1)
            else:
                with Path(name).open("rb") as file:
                    raw = file.read(BIBTEX_MAX_BYTES + 1)
        except OSError as exc:
            raise CommandError(f"{name}: cannot read: {exc.strerror}.") from exc
        try:
            report = library_import_bibtex(tenant_id=tenant.pk, text=bibtex_bytes_decode(raw))
        except InvalidInput as exc:
            raise CommandError(f"{name}: {exc.message}") from exc
        self.stdout.write(f"{tenant.slug}: {report.summary()}")
        for line in report.lines()[1:]:
            self.stdout.write(line)

"""manage.py import_bibtex TENANT FILE: the report on stdout; a CommandError (Django's one line on
stderr and exit 1) for an unknown tenant, an unreadable file or one that is not UTF-8 text."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Tenant
from research.models import LibraryPaper

pytestmark = pytest.mark.django_db

BIB = "@article{a, title = {Deep learning}, doi = {10.1038/nature14539}}\n@article{b, author = {X}}\n"


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("import_bibtex", *args, stdout=out)
    return out.getvalue()


def test_it_imports_a_file_and_prints_the_report(tenant: Tenant, tmp_path: Path) -> None:
    path = tmp_path / "refs.bib"
    path.write_text(BIB)

    assert _run(tenant.slug, str(path)).splitlines() == [
        f"{tenant.slug}: 1 created, 0 updated, 0 unchanged, 1 skipped.",
        "skipped b: missing title",
    ]
    assert (
        _run(tenant.slug, str(path)).splitlines()[0]
        == f"{tenant.slug}: 0 created, 0 updated, 1 unchanged, 1 skipped."
    )
    assert LibraryPaper.objects.filter(tenant=tenant).count() == 1


def test_it_reads_standard_input_for_a_dash(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BIB.encode())))

    assert _run(tenant.slug, "-").startswith(f"{tenant.slug}: 1 created")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"@article{a, title = {\xff}}", "refs.bib: The BibTeX file is not valid UTF-8 text."),
        (
            b"@article{a, title = {\x00}}",
            "refs.bib: The BibTeX file contains a NUL character; it is not a text file.",
        ),
    ],
)
def test_a_file_that_is_not_text_is_refused_in_one_line(
    tenant: Tenant, tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "refs.bib"
    path.write_bytes(content)

    with pytest.raises(CommandError) as caught:
        _run(tenant.slug, str(path))
    assert str(caught.value) == str(path.parent / message)
    assert not LibraryPaper.objects.exists()


def test_an_unknown_tenant_or_missing_file_is_refused(tenant: Tenant, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"^No tenant 'nope'\.$"):
        _run("nope", str(tmp_path / "x.bib"))
    with pytest.raises(CommandError, match=r"x\.bib: cannot read: No such file or directory\.$"):
        _run(tenant.slug, str(tmp_path / "x.bib"))

"""The demo tenants' libraries: a small real bibliography (examples/research/demo_library.bib), so
the literature search has a source that answers offline. Imported through the same service as an
operator's file; a second run finds every entry unchanged."""

from __future__ import annotations

from pathlib import Path

from research.bibtex import ImportReport, library_import_bibtex

DEMO_LIBRARY_FILE = Path(__file__).resolve().parent.parent / "examples" / "research" / "demo_library.bib"


def library_demo_ensure(*, tenant_id: int) -> ImportReport:
    return library_import_bibtex(tenant_id=tenant_id, text=DEMO_LIBRARY_FILE.read_text(encoding="utf-8"))

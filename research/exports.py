"""A complete literature search's result as JSON, BibTeX or Markdown (``export_results``, the
research pages' downloads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXPORT_FORMATS = ("json", "bibtex", "markdown")


def export_render(*, result: Mapping[str, Any], fmt: str) -> str:
    """``result`` (a complete job's) in ``fmt``; raises ``core.errors.InvalidInput`` for an
    unknown format."""
    raise NotImplementedError("research.exports: being written")

"""A complete literature search's result as JSON, BibTeX or Markdown (``export_results``, the
research pages' downloads).

Titles and names come from public sources, so the Markdown escapes every character Markdown gives a
meaning to (a title could otherwise turn into a link or an image) and the BibTeX is
``research.bibtex``'s, which reads back unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from core.errors import InvalidInput
from core.text_safety import text_cleaned
from research.bibtex_writer import papers_to_bibtex
from research.records import doi_normalize

EXPORT_FORMATS = ("json", "bibtex", "markdown")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~>&\"'$=^:])")


def export_render(*, result: Mapping[str, Any], fmt: str) -> str:
    """``result`` (a complete job's) in ``fmt``; raises ``core.errors.InvalidInput`` for an
    unknown format."""
    if fmt == "json":
        return json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "bibtex":
        return papers_to_bibtex(_papers(result))
    if fmt == "markdown":
        return _markdown(result)
    raise InvalidInput(f"Unknown export format {str(fmt)[:40]!r}; one of: {', '.join(EXPORT_FORMATS)}.")


def _papers(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    papers = result.get("papers")
    return [paper for paper in papers if isinstance(paper, dict)] if isinstance(papers, list) else []


def markdown_escaped(value: object) -> str:
    """``value`` as literal Markdown text on one line."""
    text = " ".join(text_cleaned(str(value)).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _plan_lines(plan: object) -> list[str]:
    if not isinstance(plan, Mapping):
        return []
    terms = ", ".join(markdown_escaped(term) for term in plan.get("terms") or [])
    years = [plan.get("year_from"), plan.get("year_to")]
    lines = [f"- Terms: {terms}"] if terms else []
    if any(isinstance(year, int) for year in years):
        low, high = (str(year) if isinstance(year, int) else "any" for year in years)
        lines.append(f"- Years: {low} to {high}")
    sources = ", ".join(markdown_escaped(source) for source in plan.get("sources") or [])
    if sources:
        lines.append(f"- Sources: {sources}")
    if isinstance(plan.get("max_results"), int):
        lines.append(f"- At most {plan['max_results']} results")
    return lines


def _paper_line(number: int, paper: Mapping[str, Any]) -> str:
    parts = [f"{number}. **{markdown_escaped(paper.get('title') or 'Untitled')}**"]
    authors = [markdown_escaped(name) for name in paper.get("authors") or [] if str(name).strip()]
    if authors:
        parts.append(", ".join(authors))
    details = [markdown_escaped(paper.get("venue"))] if paper.get("venue") else []
    if isinstance(paper.get("year"), int):
        details.append(str(paper["year"]))
    if details:
        parts.append(", ".join(details))
    doi = doi_normalize(paper.get("doi") or "")
    if doi:
        # The link text escaped, the target percent-encoded: neither can close the link early.
        parts.append(f"[doi:{markdown_escaped(doi)}](https://doi.org/{quote(doi, safe='/;:')})")
    return ". ".join(parts)


def _markdown(result: Mapping[str, Any]) -> str:
    query = markdown_escaped(result.get("query") or "")
    papers = _papers(result)
    lines = [f"# Literature search: {query}", "", f"Query: {query}", ""]
    plan_lines = _plan_lines(result.get("plan"))
    if plan_lines:
        lines += ["## Plan", "", *plan_lines, ""]
    lines += [f"## Papers ({len(papers)})", ""]
    lines += [_paper_line(number, paper) for number, paper in enumerate(papers, start=1)] or ["No papers."]
    return "\n".join(lines) + "\n"

"""Crossref (https://api.crossref.org): the DOI registry's own metadata, every publisher's.

Titles and venues come as lists, authors as given and family names, abstracts (when the publisher
deposited one) as JATS XML, whose tags are dropped here.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote

from core.conf import gatehouse_settings
from research.records import Paper, doi_normalize
from research.sources.base import SearchPlan
from research.sources.http import (
    ABSTRACT_MAX_CHARS,
    AUTHORS_MAX,
    TITLE_MAX_CHARS,
    clean,
    json_get,
    polite_params,
    shape_error,
    year_of,
)

NAME = "Crossref"
ROWS_MAX = 1000
_TAG = re.compile(r"<[^>]{0,500}>")


def jats_text(value: object) -> str:
    """A JATS abstract (``<jats:p>...</jats:p>``) as plain text."""
    if not isinstance(value, str):
        return ""
    text = _TAG.sub(" ", value[: ABSTRACT_MAX_CHARS * 4])
    # Publishers often open with <jats:title>Abstract</jats:title>.
    return clean(html.unescape(text), max_chars=ABSTRACT_MAX_CHARS).removeprefix("Abstract ")


def _first(value: object, *, max_chars: int) -> str:
    if isinstance(value, list):
        value = next((item for item in value if isinstance(item, str) and item.strip()), "")
    return clean(value, max_chars=max_chars)


def _year(item: dict[str, object]) -> int | None:
    for key in ("published", "published-print", "published-online", "issued", "created"):
        date = item.get(key)
        parts = date.get("date-parts") if isinstance(date, dict) else None
        if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
            year = year_of(parts[0][0])
            if year is not None:
                return year
    return None


def _author(author: object) -> str:
    if not isinstance(author, dict):
        return ""
    name = " ".join(part for part in (clean(author.get("given")), clean(author.get("family"))) if part)
    return name or clean(author.get("name"))


def _paper(item: object) -> Paper | None:
    if not isinstance(item, dict):
        raise shape_error(NAME)
    title = _first(item.get("title"), max_chars=TITLE_MAX_CHARS)
    doi = doi_normalize(item.get("DOI"))
    if not title and not doi:
        return None
    raw_authors = item.get("author")
    authors = [
        name for name in (_author(a) for a in (raw_authors if isinstance(raw_authors, list) else [])) if name
    ][:AUTHORS_MAX]
    url = clean(item.get("URL"), max_chars=2000)
    return Paper(
        title=title or f"DOI {doi}",
        authors=tuple(authors),
        year=_year(item),
        venue=_first(item.get("container-title"), max_chars=500),
        doi=doi,
        abstract=jats_text(item.get("abstract")),
        url=url if url.startswith(("https://", "http://")) else (f"https://doi.org/{doi}" if doi else ""),
        sources=("crossref",),
        ids={"crossref": doi} if doi else {},
    )


class CrossrefSource:
    name = "crossref"
    title = "Crossref"

    def search(self, *, plan: SearchPlan, tenant_id: int, limit: int) -> list[Paper]:
        base = gatehouse_settings.RESEARCH_CROSSREF_URL.rstrip("/")
        params: dict[str, str | int] = {"query": plan.query_text(), "rows": max(1, min(limit, ROWS_MAX))}
        filters = []
        if plan.year_from is not None:
            filters.append(f"from-pub-date:{plan.year_from}")
        if plan.year_to is not None:
            filters.append(f"until-pub-date:{plan.year_to}")
        if filters:
            params["filter"] = ",".join(filters)
        answer = json_get(source=NAME, url=f"{base}/works", params=polite_params(**params))
        message = answer.get("message") if isinstance(answer, dict) else None
        items = message.get("items") if isinstance(message, dict) else None
        if not isinstance(items, list):
            raise shape_error(NAME)
        return [paper for paper in map(_paper, items) if paper is not None][:limit]

    def lookup_doi(self, *, doi: str, tenant_id: int) -> Paper | None:
        doi = doi_normalize(doi)
        if not doi:
            return None
        base = gatehouse_settings.RESEARCH_CROSSREF_URL.rstrip("/")
        answer = json_get(
            source=NAME,
            url=f"{base}/works/{quote(doi, safe='/:;()')}",
            params=polite_params(),
            missing_ok=True,
        )
        if answer is None:
            return None
        message = answer.get("message") if isinstance(answer, dict) else None
        if not isinstance(message, dict):
            raise shape_error(NAME)
        return _paper(message)


source = CrossrefSource()

"""arXiv (https://info.arxiv.org/help/api): preprints in physics, mathematics and computer science.

The API answers in Atom, read with feedparser. It reports a bad query as a feed whose one entry is
an error (its id under ``arxiv.org/api/errors``), with HTTP 200, so that is checked here. A DOI
lookup answers only arXiv's own DOIs (10.48550/arXiv.<id>); a journal DOI is Crossref's.
"""

from __future__ import annotations

import io
import re

import feedparser  # type: ignore[import-untyped]

from core.conf import gatehouse_settings
from research.records import Paper, doi_normalize
from research.sources.base import SearchPlan, SourceError
from research.sources.http import (
    ABSTRACT_MAX_CHARS,
    AUTHORS_MAX,
    TITLE_MAX_CHARS,
    clean,
    shape_error,
    text_get,
)

NAME = "arXiv"
MAX_RESULTS_MAX = 1000
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(?P<id>\d{4}\.\d{4,5}|[a-z.-]+/\d{7})$")
_ABS_ID = re.compile(r"arxiv\.org/abs/(?P<id>[\w./-]+?)(?:v\d+)?$")
_QUOTE_SAFE = re.compile(r'["\\]')


def _term(term: str) -> str:
    # arXiv's query syntax: a phrase in double quotes; a quote inside would end it early.
    term = _QUOTE_SAFE.sub(" ", term).strip()
    return f'all:"{term}"' if " " in term else f"all:{term}"


def search_query(plan: SearchPlan) -> str:
    query = " AND ".join(_term(term) for term in plan.terms if term.strip())
    if plan.year_from is not None or plan.year_to is not None:
        start = f"{plan.year_from or 1991}01010000"
        end = f"{plan.year_to or 9999}12312359"
        query = (
            f"({query}) AND submittedDate:[{start} TO {end}]"
            if query
            else f"submittedDate:[{start} TO {end}]"
        )
    return query


def _year(entry: feedparser.FeedParserDict) -> int | None:
    published = entry.get("published_parsed")
    return published.tm_year if published else None


def _paper(entry: feedparser.FeedParserDict) -> Paper | None:
    match = _ABS_ID.search(clean(entry.get("id"), max_chars=300))
    arxiv_id = match.group("id") if match else ""
    title = clean(entry.get("title"), max_chars=TITLE_MAX_CHARS)
    if not title:
        return None
    authors = [clean(author.get("name")) for author in entry.get("authors", [])[:AUTHORS_MAX]]
    # arXiv's own DOI for every paper since 2022; a journal DOI when the authors gave one.
    doi = doi_normalize(entry.get("arxiv_doi")) or (f"10.48550/arxiv.{arxiv_id}" if arxiv_id else "")
    return Paper(
        title=title,
        authors=tuple(name for name in authors if name),
        year=_year(entry),
        venue=clean(entry.get("arxiv_journal_ref")) or "arXiv",
        doi=doi_normalize(doi),
        abstract=clean(entry.get("summary"), max_chars=ABSTRACT_MAX_CHARS),
        url=f"https://arxiv.org/abs/{arxiv_id}" if arxiv_id else "",
        sources=("arxiv",),
        ids={"arxiv": arxiv_id} if arxiv_id else {},
    )


def _entries(body: bytes) -> list[feedparser.FeedParserDict]:
    # A stream, never bytes or a string: feedparser opens those as a file path or fetches them as a
    # URL when they look like one, so a server answering "/etc/passwd" would have it read.
    feed = feedparser.parse(io.BytesIO(body), sanitize_html=False, resolve_relative_uris=False)
    # A declared encoding that differs from the real one is no reason to refuse the feed.
    bozo = feed.get("bozo") and not isinstance(
        feed.get("bozo_exception"), feedparser.CharacterEncodingOverride
    )
    if bozo or not str(feed.get("version", "")).startswith("atom"):
        raise SourceError(f"{NAME} answered with invalid XML.")
    entries = feed.get("entries")
    if not isinstance(entries, list):
        raise shape_error(NAME)
    for entry in entries:
        if "arxiv.org/api/errors" in str(entry.get("id", "")):
            raise SourceError(f"{NAME} refused the query.")
    return entries


class ArxivSource:
    name = "arxiv"
    title = "arXiv"

    def search(self, *, plan: SearchPlan, tenant_id: int, limit: int) -> list[Paper]:
        query = search_query(plan)
        if not query:
            return []
        params: dict[str, str | int] = {
            "search_query": query,
            "start": 0,
            "max_results": max(1, min(limit, MAX_RESULTS_MAX)),
            "sortBy": "relevance",
        }
        body = text_get(source=NAME, url=gatehouse_settings.RESEARCH_ARXIV_URL, params=params)
        return [paper for paper in map(_paper, _entries(body)) if paper is not None][:limit]

    def lookup_doi(self, *, doi: str, tenant_id: int) -> Paper | None:
        match = _ARXIV_DOI.match(doi_normalize(doi))
        if match is None:
            return None
        params: dict[str, str | int] = {"id_list": match.group("id"), "max_results": 1}
        body = text_get(source=NAME, url=gatehouse_settings.RESEARCH_ARXIV_URL, params=params)
        papers = [paper for paper in map(_paper, _entries(body)) if paper is not None]
        return papers[0] if papers else None


source = ArxivSource()

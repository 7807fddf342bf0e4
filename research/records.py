"""A paper as every source gives it, and how records from several sources become one list.

Records are merged by DOI first (case and ``https://doi.org/`` prefixes ignored), then by
normalised title (case, accents, punctuation and spacing ignored). A merged record keeps the first
source's fields and fills what it lacks from the others, and lists every source that found it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from core.text_safety import text_cleaned

_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)
_DOI_SHAPE = re.compile(r"^10\.\d{4,9}/\S+$")
_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
ABSTRACT_SNIPPET_CHARS = 300


def doi_normalize(raw: object) -> str:
    """The DOI in lower case without resolver prefix, or '' when ``raw`` is not a DOI."""
    if not isinstance(raw, str):
        return ""
    doi = _DOI_PREFIX.sub("", raw.strip()).strip().lower()
    return doi if _DOI_SHAPE.match(doi) and len(doi) <= 300 else ""


def title_normalize(title: str) -> str:
    """The title as deduplication compares it: no case, accents, punctuation or extra spaces."""
    decomposed = unicodedata.normalize("NFKD", title.casefold())
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(_NOT_WORD.sub(" ", plain).split())


@dataclass(frozen=True)
class Paper:
    title: str
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str = ""
    doi: str = ""
    abstract: str = ""
    url: str = ""
    sources: tuple[str, ...] = ()
    # Identifiers by source: {"openalex": "W...", "arxiv": "2101.00001"}.
    ids: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Whatever the source (an API, the library, a stored job), the text people are shown and
        # export has no character that reorders or hides it (a title reading backwards).
        object.__setattr__(self, "title", text_cleaned(self.title))
        object.__setattr__(self, "authors", tuple(text_cleaned(name) for name in self.authors))
        object.__setattr__(self, "venue", text_cleaned(self.venue))
        object.__setattr__(self, "abstract", text_cleaned(self.abstract))

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["authors"] = list(self.authors)
        data["sources"] = list(self.sources)
        data["ids"] = dict(self.ids)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Paper:
        return cls(
            title=str(data.get("title") or ""),
            authors=tuple(str(a) for a in data.get("authors") or ()),
            year=data.get("year") if isinstance(data.get("year"), int) else None,
            venue=str(data.get("venue") or ""),
            doi=doi_normalize(data.get("doi") or ""),
            abstract=str(data.get("abstract") or ""),
            url=str(data.get("url") or ""),
            sources=tuple(str(s) for s in data.get("sources") or ()),
            ids={str(k): str(v) for k, v in (data.get("ids") or {}).items()},
        )

    def snippet(self) -> str:
        if len(self.abstract) <= ABSTRACT_SNIPPET_CHARS:
            return self.abstract
        return self.abstract[: ABSTRACT_SNIPPET_CHARS - 1].rstrip() + "…"


def _fill(kept: Paper, other: Paper) -> Paper:
    return replace(
        kept,
        authors=kept.authors or other.authors,
        year=kept.year if kept.year is not None else other.year,
        venue=kept.venue or other.venue,
        doi=kept.doi or other.doi,
        abstract=kept.abstract or other.abstract,
        url=kept.url or other.url,
        sources=kept.sources + tuple(s for s in other.sources if s not in kept.sources),
        ids={**other.ids, **kept.ids},
    )


def papers_merge(papers: Iterable[Paper]) -> list[Paper]:
    """One record per paper, in first-seen order: by DOI, then by normalised title."""
    merged: list[Paper] = []
    by_doi: dict[str, int] = {}
    by_title: dict[str, int] = {}
    for paper in papers:
        title_key = title_normalize(paper.title)
        if not title_key and not paper.doi:
            continue
        index = by_doi.get(paper.doi) if paper.doi else None
        if index is None and title_key:
            candidate = by_title.get(title_key)
            # Same title, different DOIs: two papers (an erratum, a reprint), not one.
            if candidate is not None and not (paper.doi and merged[candidate].doi):
                index = candidate
        if index is None:
            merged.append(paper)
            index = len(merged) - 1
        else:
            merged[index] = _fill(merged[index], paper)
        if merged[index].doi:
            by_doi.setdefault(merged[index].doi, index)
        if title_key:
            by_title.setdefault(title_key, index)
    return merged

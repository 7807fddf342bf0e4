"""The one interface every literature source implements, and the search plan it is given.

A source's failure (network down, a timeout, a 5xx, an answer that is not what its API documents)
is a ``SourceError`` with a short message for the person; the job reports it in its checkpoint and
goes on with the other sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from research.records import Paper


@dataclass(frozen=True)
class SearchPlan:
    terms: tuple[str, ...]
    year_from: int | None
    year_to: int | None
    sources: tuple[str, ...]
    max_results: int

    def as_json(self) -> dict[str, Any]:
        return {
            "terms": list(self.terms),
            "year_from": self.year_from,
            "year_to": self.year_to,
            "sources": list(self.sources),
            "max_results": self.max_results,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchPlan:
        return cls(
            terms=tuple(data["terms"]),
            year_from=data.get("year_from"),
            year_to=data.get("year_to"),
            sources=tuple(data["sources"]),
            max_results=int(data["max_results"]),
        )

    def query_text(self) -> str:
        """The terms as one query string for a source's search box (phrases quoted)."""
        return " ".join(f'"{term}"' if " " in term else term for term in self.terms)


class SourceError(Exception):
    """The source could not answer; ``message`` is short and safe to show (no URL, no key)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class Source(Protocol):
    name: str
    title: str

    def search(self, *, plan: SearchPlan, tenant_id: int, limit: int) -> list[Paper]:
        """Up to ``limit`` papers matching the plan's terms and years; raises ``SourceError``."""
        ...

    def lookup_doi(self, *, doi: str, tenant_id: int) -> Paper | None:
        """The paper with this (normalised) DOI, None if the source has none; raises ``SourceError``."""
        ...

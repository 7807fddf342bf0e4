"""A paper's id in a literature search (``p1``, ``p2``, ...): given when the paper is first shown,
it means that paper for the rest of the job.

A person notes ids at screening and names them at the final checkpoint ("keep p4"), so ids are
never renumbered: every stored paper (a candidate, one of the selection, one of the result) carries
its ``id``, and the job's context keeps every paper given one (``paper_ids``: its id, DOI and
normalised title) and the next number (``paper_id_next``). A paper found again (by a refined search,
or added by DOI after it was dropped) gets its id back, matched as ``research.records.papers_merge``
matches records: by DOI, then by normalised title unless both have DOIs. Any other paper gets the
next number, so an id never names two papers.

A decision's ``keep`` is resolved against the papers of the checkpoint it decides: an id or DOI
that checkpoint does not list is refused by name, never mapped to another paper.

Jobs stored before ids were kept have papers without one: each is numbered by its place in its
list, as it was shown then, and papers given ids later take numbers none of those has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from core.errors import InvalidInput
from research.records import Paper, doi_normalize, title_normalize

ID_PREFIX = "p"
KNOWN_KEY = "paper_ids"
NEXT_KEY = "paper_id_next"
KEEP_NOT_IDS = "keep must be a list of paper ids (p1, p2, ...) or DOIs."
KEEP_UNKNOWN = (
    "keep names no paper shown at the {checkpoint} checkpoint: {names}. "
    "Keep the ids (or DOIs) of the papers it lists."
)
# A refusal names this many of the unknown ids, each cut to this many characters.
UNKNOWN_NAMED = 10
UNKNOWN_CHARS = 40
_NUMBER = re.compile(r"p([1-9][0-9]{0,8})")


def papers_numbered(papers: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stored papers, each with its id: its own, or (a job stored before ids were kept) its
    place in the list, as it was shown then."""
    return [
        {**paper, "id": paper["id"] if _is_id(paper.get("id")) else f"{ID_PREFIX}{index}"}
        for index, paper in enumerate(papers, start=1)
    ]


def papers_identified(
    *, context: Mapping[str, Any], papers: Iterable[Paper], taken: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``papers`` as the job stores them, each with its id (the one it was given before, else the
    next number), and the context's bookkeeping of ids with them added. ``taken``: the ids of the
    list these papers join (a selection DOIs are added to), which none of them may get again."""
    registry = _Registry.of(context)
    used = set(taken)
    stored: list[dict[str, Any]] = []
    for paper in papers:
        paper_id = registry.id_for(paper, used=used)
        used.add(paper_id)
        stored.append({**paper.as_json(), "id": paper_id})
    return stored, registry.as_json()


def papers_kept(
    *, papers: Iterable[Mapping[str, Any]], keep: object, checkpoint: str
) -> list[dict[str, Any]]:
    """The papers ``keep`` names, by id or DOI, among ``papers`` (the list the ``checkpoint`` being
    decided shows), in the order named; ``InvalidInput`` naming every id it does not show."""
    if not isinstance(keep, list) or not all(isinstance(item, str) for item in keep):
        raise InvalidInput(KEEP_NOT_IDS)
    numbered = papers_numbered(papers)
    by_id = {paper["id"]: paper for paper in numbered}
    by_doi: dict[str, dict[str, Any]] = {}
    for paper in numbered:
        doi = doi_normalize(paper.get("doi") or "")
        if doi:
            by_doi.setdefault(doi, paper)
    kept: dict[str, dict[str, Any]] = {}
    unknown: list[str] = []
    for item in keep:
        named = by_id.get(item) or by_doi.get(doi_normalize(item))
        if named is None:
            unknown.append(item)
        else:
            kept.setdefault(named["id"], named)
    if unknown:
        names = ", ".join(repr(item[:UNKNOWN_CHARS]) for item in unknown[:UNKNOWN_NAMED])
        if len(unknown) > UNKNOWN_NAMED:
            names += f" and {len(unknown) - UNKNOWN_NAMED} more"
        raise InvalidInput(KEEP_UNKNOWN.format(checkpoint=checkpoint, names=names))
    return list(kept.values())


def _is_id(value: object) -> bool:
    return isinstance(value, str) and _NUMBER.fullmatch(value) is not None


def _number(paper_id: str) -> int:
    match = _NUMBER.fullmatch(paper_id)
    return int(match.group(1)) if match else 0


class _Registry:
    """Every paper of the job given an id: its id, DOI and normalised title, looked up by DOI and
    by title."""

    def __init__(self, *, entries: list[dict[str, str]], next_number: int) -> None:
        self.entries: list[dict[str, str]] = []
        # Never below a number already given, whatever the stored counter says.
        self.next_number = max([next_number, *(_number(entry["id"]) + 1 for entry in entries)])
        self._by_doi: dict[str, dict[str, str]] = {}
        self._by_title: dict[str, list[dict[str, str]]] = {}
        for entry in entries:
            self._add(entry)

    @classmethod
    def of(cls, context: Mapping[str, Any]) -> _Registry:
        known, next_number = context.get(KNOWN_KEY), context.get(NEXT_KEY)
        if isinstance(known, list) and isinstance(next_number, int):
            entries = [
                {
                    "id": str(entry["id"]),
                    "doi": str(entry.get("doi") or ""),
                    "title": str(entry.get("title") or ""),
                }
                for entry in known
                if isinstance(entry, Mapping) and _is_id(entry.get("id"))
            ]
            return cls(entries=entries, next_number=next_number)
        # A job stored before ids were kept: its papers keep the numbers they were shown with
        # (the candidates' first where the selection's numbering clashes), and no new id is one of those.
        entries, seen, highest = [], set(), 0
        for name in ("candidates", "selection"):
            stored = context.get(name)
            for paper in papers_numbered(stored if isinstance(stored, list) else []):
                highest = max(highest, _number(paper["id"]))
                if paper["id"] not in seen:
                    seen.add(paper["id"])
                    entries.append(_entry(paper["id"], Paper.from_json(paper)))
        return cls(entries=entries, next_number=highest + 1)

    def as_json(self) -> dict[str, Any]:
        return {KNOWN_KEY: self.entries, NEXT_KEY: self.next_number}

    def id_for(self, paper: Paper, *, used: set[str]) -> str:
        doi = doi_normalize(paper.doi)
        entry = self._match(paper, doi=doi, used=used)
        if entry is None:
            entry = _entry(f"{ID_PREFIX}{self.next_number}", paper)
            self.next_number += 1
            self._add(entry)
        elif doi and not entry["doi"]:
            # Known by its title until now: from here on by its DOI too, so that another paper of
            # the same title and another DOI is not taken for it.
            entry["doi"] = doi
            self._by_doi.setdefault(doi, entry)
        return entry["id"]

    def _match(self, paper: Paper, *, doi: str, used: set[str]) -> dict[str, str] | None:
        if doi:
            entry = self._by_doi.get(doi)
            if entry is not None:
                return entry if entry["id"] not in used else None
        title = title_normalize(paper.title)
        for entry in self._by_title.get(title, []) if title else []:
            # Same title, two DOIs: two papers (an erratum, a reprint), as papers_merge has it.
            if entry["id"] not in used and not (doi and entry["doi"]):
                return entry
        return None

    def _add(self, entry: dict[str, str]) -> None:
        self.entries.append(entry)
        if entry["doi"]:
            self._by_doi.setdefault(entry["doi"], entry)
        if entry["title"]:
            self._by_title.setdefault(entry["title"], []).append(entry)


def _entry(paper_id: str, paper: Paper) -> dict[str, str]:
    return {"id": paper_id, "doi": doi_normalize(paper.doi), "title": title_normalize(paper.title)}

"""BibTeX in: a tenant's library filled from a .bib file (the way out is ``research.bibtex_writer``).

Import (``library_import_bibtex``, shared by the admin's page, ``manage.py import_bibtex`` and the
demo) upserts ``LibraryPaper`` rows: by DOI, else by normalised title (as ``papers_merge`` matches
records), and reports each entry it skipped and why, so one bad entry never loses the rest.
LaTeX in titles, venues and names (``{\\"o}``, ``\\&``, protective braces) is decoded to plain
Unicode because that is what the search compares and the pages show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import bibtexparser
from bibtexparser.middlewares import NormalizeFieldKeys, SeparateCoAuthors, SplitNameParts
from bibtexparser.middlewares.names import MergeNameParts
from bibtexparser.model import DuplicateBlockKeyBlock, Entry, ParsingFailedBlock
from django.db import IntegrityError, transaction
from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db  # type: ignore[import-untyped]

from core.errors import InvalidInput
from core.text_safety import text_cleaned, text_unstorable_reason
from research import models
from research.models import LibraryPaper
from research.records import doi_normalize, title_normalize

BIBTEX_MAX_BYTES = 5 * 1024 * 1024
ENTRIES_MAX = 10_000
AUTHORS_MAX = 100
AUTHOR_MAX_CHARS = 300
TOO_LARGE = f"The BibTeX file is larger than {BIBTEX_MAX_BYTES // (1024 * 1024)} MB."
NOT_UTF8 = "The BibTeX file is not valid UTF-8 text."
HAS_NUL = "The BibTeX file contains a NUL character; it is not a text file."
TOO_MANY = f"The BibTeX file has more than {ENTRIES_MAX} entries."

CREATED, UPDATED, UNCHANGED, SKIPPED = "created", "updated", "unchanged", "skipped"


@dataclass(frozen=True)
class EntryOutcome:
    key: str
    outcome: str
    reason: str = ""
    title: str = ""


@dataclass
class ImportReport:
    entries: list[EntryOutcome] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for entry in self.entries if entry.outcome == outcome)

    @property
    def created(self) -> int:
        return self.count(CREATED)

    @property
    def updated(self) -> int:
        return self.count(UPDATED)

    @property
    def unchanged(self) -> int:
        return self.count(UNCHANGED)

    @property
    def skipped(self) -> int:
        return self.count(SKIPPED)

    def summary(self) -> str:
        return (
            f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.skipped} skipped."
        )

    def lines(self) -> list[str]:
        """The summary, then one line per skipped entry."""
        skipped = [f"skipped {e.key or '(no key)'}: {e.reason}" for e in self.entries if e.outcome == SKIPPED]
        return [self.summary(), *skipped]


@dataclass(frozen=True)
class ParsedEntry:
    key: str
    entry_type: str
    title: str
    authors: list[str]
    year: int | None
    venue: str
    doi: str
    abstract: str
    url: str


# -- decoding --------------------------------------------------------------------------------------
def bibtex_bytes_decode(data: bytes) -> str:
    """An uploaded file's text; ``InvalidInput`` when it is too large or not UTF-8 text."""
    if len(data) > BIBTEX_MAX_BYTES:
        raise InvalidInput(TOO_LARGE)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput(NOT_UTF8) from None


def _decoder() -> LatexNodes2Text:
    context = get_default_latex_context_db()
    context.add_context_category(
        "gatehouse-bibtex",
        prepend=True,
        macros=[
            MacroTextSpec("url", simplify_repl="%s"),
            # pylatexenc's default is U+02C6 (a modifier letter), not the caret the export wrote.
            MacroTextSpec("textasciicircum", simplify_repl="^"),
        ],
    )
    return LatexNodes2Text(latex_context=context, math_mode="verbatim")


_DECODER = _decoder()


def latex_decoded(value: str) -> str:
    try:
        decoded = _DECODER.latex_to_text(value)
    except Exception:  # pylatexenc raises many kinds, and RecursionError on deep braces
        decoded = value
    return " ".join(text_cleaned(decoded).split())


def _field(entry: Entry, name: str) -> str:
    found = entry.fields_dict.get(name)
    return found.value if found is not None and isinstance(found.value, str) else ""


def _year(raw: str) -> int | None:
    match = re.search(r"\b(\d{4})\b", raw)
    return int(match.group(1)) if match and 1000 <= int(match.group(1)) <= 3000 else None


def _url(raw: str) -> str:
    url = text_cleaned(raw).strip()
    if not url.startswith(("https://", "http://")) or len(url) > models.URL_MAX_CHARS or " " in url:
        return ""
    return url


def _authors(entry: Entry) -> list[str]:
    found = entry.fields_dict.get("author") or entry.fields_dict.get("editor")
    names = found.value if found is not None else []
    if isinstance(names, str):
        names = [names]
    # A bare "and others" is BibTeX's et al., not a person; "{others}" in braces is someone so named.
    people = (name for name in names if isinstance(name, str) and name.strip() != "others")
    decoded = (latex_decoded(name)[:AUTHOR_MAX_CHARS] for name in people)
    return [name for name in decoded if name][:AUTHORS_MAX]


def _parsed(entry: Entry) -> ParsedEntry:
    doi = doi_normalize(text_cleaned(_field(entry, "doi")))
    url = _url(_field(entry, "url"))
    if not doi and url:
        doi = doi_normalize(url)
    venue = next(
        (
            _field(entry, name)
            for name in ("journal", "booktitle", "howpublished", "publisher")
            if _field(entry, name)
        ),
        "",
    )
    return ParsedEntry(
        key=text_cleaned(entry.key)[: models.KEY_MAX_CHARS],
        entry_type=text_cleaned(entry.entry_type).lower()[:40],
        title=latex_decoded(_field(entry, "title")),
        authors=_authors(entry),
        year=_year(_field(entry, "year") or _field(entry, "date")),
        venue=latex_decoded(venue)[: models.VENUE_MAX_CHARS],
        doi=doi,
        abstract=latex_decoded(_field(entry, "abstract"))[: models.ABSTRACT_MAX_CHARS],
        url=url,
    )


def _parse_stack() -> list[Any]:
    return [NormalizeFieldKeys(), SeparateCoAuthors(), SplitNameParts(), MergeNameParts(style="first")]


def bibtex_parse(text: str) -> tuple[list[ParsedEntry | EntryOutcome], int]:
    """Each block of ``text`` in order: a parsed entry, or the outcome of one that failed; and the
    number of entries. ``InvalidInput`` for text no import should read."""
    if len(text.encode("utf-8", "surrogatepass")) > BIBTEX_MAX_BYTES:
        raise InvalidInput(TOO_LARGE)
    reason = text_unstorable_reason(text)
    if reason:
        raise InvalidInput(HAS_NUL if "NUL" in reason else NOT_UTF8)
    library = bibtexparser.parse_string(text, append_middleware=_parse_stack())
    if len(library.entries) + len(library.failed_blocks) > ENTRIES_MAX:
        raise InvalidInput(TOO_MANY)
    blocks: list[ParsedEntry | EntryOutcome] = []
    for block in library.blocks:
        if isinstance(block, DuplicateBlockKeyBlock):
            key = text_cleaned(str(block.key))[:80]
            blocks.append(EntryOutcome(key=key, outcome=SKIPPED, reason="duplicate key in this file"))
        elif isinstance(block, ParsingFailedBlock):
            line = (block.start_line or 0) + 1
            key = _raw_key(block.raw or "")
            blocks.append(EntryOutcome(key=key, outcome=SKIPPED, reason=f"could not be parsed (line {line})"))
        elif isinstance(block, Entry):
            blocks.append(_parsed(block))
    return blocks, len(library.entries)


def _raw_key(raw: str) -> str:
    match = re.match(r"\s*@\s*\w+\s*[{(]\s*([^,\s]{1,80})", raw)
    return text_cleaned(match.group(1)) if match else ""


# -- import ----------------------------------------------------------------------------------------
def library_import_bibtex(*, tenant_id: int, text: str) -> ImportReport:
    """Upsert the entries of ``text`` into the tenant's library; see the module docstring."""
    blocks, _ = bibtex_parse(text)
    report = ImportReport()
    with transaction.atomic():
        for block in blocks:
            if isinstance(block, EntryOutcome):
                report.entries.append(block)
                continue
            try:
                with transaction.atomic():
                    report.entries.append(_upsert(tenant_id=tenant_id, parsed=block))
            except IntegrityError:
                report.entries.append(
                    EntryOutcome(
                        key=block.key, outcome=SKIPPED, reason="its DOI was imported at the same time"
                    )
                )
    return report


def _upsert(*, tenant_id: int, parsed: ParsedEntry) -> EntryOutcome:
    if not parsed.title:
        return EntryOutcome(key=parsed.key, outcome=SKIPPED, reason="missing title")
    if len(parsed.title) > models.TITLE_MAX_CHARS:
        return EntryOutcome(
            key=parsed.key, outcome=SKIPPED, reason=f"title longer than {models.TITLE_MAX_CHARS} characters"
        )
    title_key = title_normalize(parsed.title)[: models.TITLE_MAX_CHARS]
    if not title_key and not parsed.doi:
        return EntryOutcome(
            key=parsed.key, outcome=SKIPPED, reason="title has no letters or digits and no DOI"
        )
    rows = LibraryPaper.objects.select_for_update().filter(tenant_id=tenant_id)
    row = rows.filter(doi=parsed.doi).first() if parsed.doi else None
    if row is None and title_key:
        # Same title, different DOIs: two papers (as papers_merge decides).
        same_title = rows.filter(title_key=title_key)
        row = (same_title.filter(doi="") if parsed.doi else same_title).order_by("pk").first()
    values = {
        "title": parsed.title,
        "title_key": title_key,
        "authors": parsed.authors,
        "year": parsed.year,
        "venue": parsed.venue,
        "abstract": parsed.abstract,
        "url": parsed.url,
        "bibtex_key": parsed.key,
        "entry_type": parsed.entry_type,
    }
    if row is None:
        LibraryPaper.objects.create(tenant_id=tenant_id, doi=parsed.doi, **values)
        return EntryOutcome(key=parsed.key, outcome=CREATED, title=parsed.title)
    if parsed.doi and not row.doi:
        values["doi"] = parsed.doi
    # An entry without an abstract or URL keeps the one the library has.
    changed = {
        name: value
        for name, value in values.items()
        if getattr(row, name) != value and (value or name not in ("abstract", "url", "venue", "authors"))
    }
    if not changed:
        return EntryOutcome(key=parsed.key, outcome=UNCHANGED, title=parsed.title)
    for name, value in changed.items():
        setattr(row, name, value)
    row.save(update_fields=[*changed, "updated"])
    return EntryOutcome(key=parsed.key, outcome=UPDATED, title=parsed.title)

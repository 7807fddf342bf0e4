"""Papers written as BibTeX (``export_results`` and the research pages' download): valid for
BibTeX and for ``research.bibtex``'s reader, which reads every title, name and DOI back unchanged.

Special characters are escaped, characters that would form a LaTeX ligature are grouped, people are
written "Family, Given" so reference managers split their names right, and every entry has a
unique key in the usual author-year-word shape (vaswani2017attention, then ...a, ...b).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from core.text_safety import text_cleaned
from research.records import doi_normalize

_ESCAPES = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "%": r"\%",
    "&": r"\&",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
# LaTeX ligatures (-- ---, `` '', ?` !`) would change the text: a character that would start or
# join one goes in its own group; a lone hyphen or apostrophe stays as it is.
_LIGATURE_PARTS = re.compile(r"-(?=-)|(?<=-)-|`(?=`)|(?<=`)`|'(?=')|(?<=')'|[?!](?=`)|(?<=[?!])`")
# A person's name BibTeX can take as "Family, Given": words only, no comma, brace or "and".
_PLAIN_NAME = re.compile(r"^[^\W\d_][\w.'\-]*(?: [^\W\d_][\w.'\-]*)+$")
_PARTICLES = frozenset(
    {
        "van",
        "von",
        "der",
        "den",
        "de",
        "del",
        "della",
        "di",
        "da",
        "du",
        "le",
        "la",
        "ten",
        "ter",
        "dos",
        "das",
    }
)
_SAFE_DOI = re.compile(r"^10\.\d{4,9}/[A-Za-z0-9./;:()\[\]<>+_-]+$")
_STOPWORDS = frozenset({"a", "an", "the", "on", "of", "in", "for", "to", "and", "with", "from", "by", "at"})


def latex_escaped(value: str) -> str:
    text = " ".join(text_cleaned(value).split())
    grouped = _LIGATURE_PARTS.sub(lambda match: "\x00" + match.group() + "\x01", text)
    escaped = "".join(_ESCAPES.get(ch, ch) for ch in grouped)
    return escaped.replace("\x00", "{").replace("\x01", "}")


def _plain_name(text: str) -> bool:
    words = text.casefold().split(" ")
    return bool(_PLAIN_NAME.match(text)) and "and" not in words and "others" not in words


def _bibtex_name(name: str) -> str:
    """A person's name as BibTeX reads one: "Family, Given" (reference managers split it right),
    with a family name's particles kept ("van der Berg, Jan"); anything else (an organisation, a
    name with a comma) in braces, as one name."""
    plain = " ".join(text_cleaned(name).split())
    family, comma, given = plain.partition(", ")
    if comma and "," not in given and _plain_name(f"{given} {family}"):
        return f"{latex_escaped(family)}, {latex_escaped(given)}"
    if not comma and _plain_name(plain):
        words = plain.split(" ")
        start = len(words) - 1
        while start > 1 and words[start - 1] in _PARTICLES:
            start -= 1
        return f"{latex_escaped(' '.join(words[start:]))}, {latex_escaped(' '.join(words[:start]))}"
    return "{" + latex_escaped(plain) + "}"


def _ascii_word(value: str) -> str:
    plain = unicodedata.normalize("NFKD", value)
    return "".join(ch for ch in plain.lower() if "a" <= ch <= "z" or "0" <= ch <= "9")


def _citation_key(paper: Mapping[str, Any]) -> str:
    authors = paper.get("authors") or []
    last = _ascii_word(str(authors[0]).split()[-1]) if authors and str(authors[0]).split() else ""
    year = paper.get("year")
    words = (_ascii_word(word) for word in str(paper.get("title") or "").split())
    first_word = next((word for word in words if word and word not in _STOPWORDS), "")
    key = f"{last[:30]}{year if isinstance(year, int) else ''}{first_word[:30]}"
    return key or "paper"


def _suffixes() -> Iterable[str]:
    yield ""
    letters = "abcdefghijklmnopqrstuvwxyz"
    yield from letters
    yield from (a + b for a in letters for b in letters)
    number = 0
    while True:
        number += 1
        yield f"x{number}"


def _unique(key: str, taken: set[str]) -> str:
    for suffix in _suffixes():
        candidate = key + suffix
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    raise AssertionError("unreachable: the suffixes never end")


def _entry(paper: Mapping[str, Any], key: str) -> str:
    fields: list[tuple[str, str]] = [("title", latex_escaped(str(paper.get("title") or "")))]
    authors = [_bibtex_name(str(name)) for name in paper.get("authors") or [] if str(name).strip()]
    if authors:
        fields.append(("author", " and ".join(authors)))
    if isinstance(paper.get("year"), int):
        fields.append(("year", str(paper["year"])))
    venue = latex_escaped(str(paper.get("venue") or ""))
    if venue:
        fields.append(("journal", venue))
    doi = doi_normalize(paper.get("doi") or "")
    if doi and _SAFE_DOI.match(doi):
        fields.append(("doi", doi))
    url = str(paper.get("url") or "") or (f"https://doi.org/{doi}" if doi else "")
    if url.startswith(("https://", "http://")):
        fields.append(("url", quote(text_cleaned(url), safe=":/?=&.-@+,;!*'()[]~%#")))
    abstract = latex_escaped(str(paper.get("abstract") or ""))
    if abstract:
        fields.append(("abstract", abstract))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{'article' if venue else 'misc'}{{{key},\n{body}\n}}\n"


def papers_to_bibtex(papers: list[dict[str, Any]]) -> str:
    """``papers`` (``Paper.as_json`` shapes) as BibTeX, one entry each, keys like vaswani2017attention."""
    taken: set[str] = set()
    return "\n".join(_entry(paper, _unique(_citation_key(paper), taken)) for paper in papers)

"""papers_to_bibtex writes BibTeX that bibtexparser reads back to the same titles, names and DOIs,
whatever characters the titles hold, with one unique citation key per paper."""

from __future__ import annotations

from typing import Any

import bibtexparser
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.text_safety import text_cleaned
from research.bibtex import ParsedEntry, bibtex_parse
from research.bibtex_writer import papers_to_bibtex

ATTENTION: dict[str, Any] = {
    "title": "Attention Is All You Need",
    "authors": ["Ashish Vaswani", "Noam Shazeer"],
    "year": 2017,
    "venue": "NeurIPS",
    "doi": "10.48550/arxiv.1706.03762",
}


def _entries(text: str) -> list[ParsedEntry]:
    blocks, count = bibtex_parse(text)
    entries = [block for block in blocks if isinstance(block, ParsedEntry)]
    assert len(entries) == count == len(blocks)
    return entries


def _shown(text: str) -> str:
    return " ".join(text_cleaned(text).split())


def test_keys_are_author_year_word_and_unique() -> None:
    papers: list[dict[str, Any]] = [
        ATTENTION,
        ATTENTION,
        {**ATTENTION, "doi": ""},
        {"title": "The On"},
        {"title": "Über Łódź", "authors": ["Paweł Ścibór"]},
    ]
    library = bibtexparser.parse_string(papers_to_bibtex(papers))

    assert [entry.key for entry in library.entries] == [
        "vaswani2017attention",
        "vaswani2017attentiona",
        "vaswani2017attentionb",
        "paper",
        "sciboruber",
    ]
    assert not library.failed_blocks


def test_an_entry_carries_its_fields() -> None:
    text = papers_to_bibtex([{**ATTENTION, "abstract": "We propose the Transformer.", "url": ""}])

    assert text == (
        "@article{vaswani2017attention,\n"
        "  title = {Attention Is All You Need},\n"
        "  author = {Vaswani, Ashish and Shazeer, Noam},\n"
        "  year = {2017},\n"
        "  journal = {NeurIPS},\n"
        "  doi = {10.48550/arxiv.1706.03762},\n"
        "  url = {https://doi.org/10.48550/arxiv.1706.03762},\n"
        "  abstract = {We propose the Transformer.}\n"
        "}\n"
    )


def test_special_characters_are_escaped_and_read_back() -> None:
    title = r"50% of {braces} & $money$ #1 snake_case ~tilde ^caret \backslash -- `quotes' ?` !`"
    text = papers_to_bibtex(
        [{"title": title, "authors": ["Doe, John and Smith", "{Odd}"], "doi": "10.1000/a_b"}]
    )
    [entry] = _entries(text)

    assert entry.title == title
    assert entry.authors == ["Doe, John and Smith", "{Odd}"]
    assert entry.doi == "10.1000/a_b"


def test_control_characters_and_unsafe_dois_and_urls_do_not_break_the_file() -> None:
    text = papers_to_bibtex(
        [
            {"title": "A\x00B\x1b", "doi": "10.1000/{evil}%", "url": "javascript:alert(1)"},
            {"title": "C", "url": "https://example.org/a b{c}\\"},
        ]
    )
    library = bibtexparser.parse_string(text)

    assert not library.failed_blocks
    assert "doi" not in library.entries[0].fields_dict
    assert "url" not in library.entries[0].fields_dict
    assert library.entries[1].fields_dict["url"].value == "https://example.org/a%20b%7Bc%7D%5C"


# LaTeX's and BibTeX's special characters, often; any other character too.
_chars = st.one_of(
    st.sampled_from(list("{}%&$#_~^\\-`'?!@,=\" \n\tand")), st.characters(exclude_categories=["Cs"])
)
_titles = st.text(_chars, min_size=1, max_size=80).filter(lambda t: _shown(t) != "")
_names = st.lists(st.text(_chars, min_size=1, max_size=30).filter(lambda t: _shown(t) != ""), max_size=4)
_dois = st.one_of(st.just(""), st.from_regex(r"10\.\d{4,6}/[a-z0-9._;()/-]{1,20}", fullmatch=True))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_titles, _names, _dois, st.one_of(st.none(), st.integers(1000, 2100))),
        min_size=1,
        max_size=5,
    )
)
@example(rows=[("0", ["others"], "", None)])  # a person named "others" is not BibTeX's et al.
def test_any_titles_names_and_dois_survive_a_round_trip(
    rows: list[tuple[str, list[str], str, int | None]],
) -> None:
    papers: list[dict[str, Any]] = [{"title": t, "authors": a, "doi": d, "year": y} for t, a, d, y in rows]
    entries = _entries(papers_to_bibtex(papers))

    assert len({entry.key for entry in entries}) == len(papers)
    for (title, authors, doi, year), entry in zip(rows, entries, strict=True):
        assert entry.title == _shown(title)
        assert entry.authors == [_shown(name) for name in authors]
        assert entry.doi == doi.lower()
        assert entry.year == year


def test_people_are_written_family_first_and_organisations_as_one_name() -> None:
    text = papers_to_bibtex(
        [
            {
                "title": "Names",
                "authors": [
                    "Kaiming He",
                    "Jan van der Berg",
                    "Doe, John",
                    "Madonna",
                    "Müller-Lüdenscheidt, Zoë",
                ],
            }
        ]
    )
    assert "author = {He, Kaiming and van der Berg, Jan and Doe, John and {Madonna} and " in text
    [entry] = _entries(text)
    assert entry.authors == [
        "Kaiming He",
        "Jan van der Berg",
        "John Doe",
        "Madonna",
        "Zoë Müller-Lüdenscheidt",
    ]


def test_a_lone_hyphen_stays_and_ligatures_are_broken() -> None:
    text = papers_to_bibtex([{"title": "Human-level control -- it's ``quoted''", "authors": []}])
    assert "title = {Human-level control {-}{-} it's {`}{`}quoted{'}{'}}" in text
    [entry] = _entries(text)
    assert entry.title == "Human-level control -- it's ``quoted''"

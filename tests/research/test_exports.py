"""A complete search's result as JSON, BibTeX and Markdown; hostile titles stay text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.errors import InvalidInput
from research.bibtex import ParsedEntry, bibtex_parse
from research.exports import EXPORT_FORMATS, export_render

RESULT: dict[str, Any] = {
    "query": "transformers for translation",
    "plan": {
        "terms": ["transformer", "machine translation"],
        "year_from": 2017,
        "year_to": None,
        "sources": ["openalex", "arxiv"],
        "max_results": 50,
    },
    "paper_count": 2,
    "summary": "2 paper(s) selected.",
    "papers": [
        {
            "title": "Attention Is All You Need",
            "authors": ["Ashish Vaswani", "Noam Shazeer"],
            "year": 2017,
            "venue": "NeurIPS",
            "doi": "10.48550/arxiv.1706.03762",
            "sources": ["arxiv"],
        },
        {"title": "BERT", "authors": [], "year": None, "venue": "", "doi": "", "sources": ["library"]},
    ],
}
HOSTILE_TITLE = (
    "[click](javascript:alert(1)) ![img](http://x/y.png) <script>x</script> *bold* `code` # 50% {a} \\ _"
)


def test_json_is_pretty_and_stable() -> None:
    text = export_render(result=RESULT, fmt="json")

    assert json.loads(text) == RESULT
    assert text == export_render(result=dict(reversed(RESULT.items())), fmt="json")
    assert text.startswith('{\n  "paper_count": 2,')


def test_bibtex_has_one_entry_per_paper() -> None:
    blocks, count = bibtex_parse(export_render(result=RESULT, fmt="bibtex"))

    assert count == 2
    assert [b.title for b in blocks if isinstance(b, ParsedEntry)] == ["Attention Is All You Need", "BERT"]
    assert [b.key for b in blocks if isinstance(b, ParsedEntry)] == ["vaswani2017attention", "bert"]


def test_markdown_lists_the_query_plan_and_numbered_papers() -> None:
    text = export_render(result=RESULT, fmt="markdown")

    assert text.splitlines() == [
        "# Literature search: transformers for translation",
        "",
        "Query: transformers for translation",
        "",
        "## Plan",
        "",
        "- Terms: transformer, machine translation",
        "- Years: 2017 to any",
        "- Sources: openalex, arxiv",
        "- At most 50 results",
        "",
        "## Papers (2)",
        "",
        "1. **Attention Is All You Need**. Ashish Vaswani, Noam Shazeer. NeurIPS, 2017. "
        "[doi:10\\.48550/arxiv\\.1706\\.03762](https://doi.org/10.48550/arxiv.1706.03762)",
        "2. **BERT**",
    ]


def test_markdown_escapes_hostile_titles_and_names() -> None:
    result = {
        **RESULT,
        "query": "# heading\nnewline",
        "papers": [{"title": HOSTILE_TITLE, "authors": ["**Mallory**\x00"], "doi": "10.1000/a)b](x"}],
    }
    text = export_render(result=result, fmt="markdown")
    line = text.splitlines()[-1]

    assert text.startswith("# Literature search: \\# heading newline\n")
    assert "\\[click\\]\\(javascript:alert\\(1\\)\\)" in line.replace("\\:", ":")
    assert "\\!\\[img\\]" in line
    assert "\\<script\\>" in line
    assert "\\*\\*Mallory\\*\\*" in line
    assert "\x00" not in text
    assert line.endswith("(https://doi.org/10.1000/a%29b%5D%28x)")


def test_bibtex_of_hostile_titles_reads_back() -> None:
    result = {
        **RESULT,
        "papers": [{"title": HOSTILE_TITLE, "authors": ["Doe, J. and Roe"], "doi": "10.1000/x"}],
    }
    [entry], count = bibtex_parse(export_render(result=result, fmt="bibtex"))

    assert count == 1
    assert isinstance(entry, ParsedEntry)
    assert entry.title == HOSTILE_TITLE
    assert entry.authors == ["Doe, J. and Roe"]


def test_an_unknown_format_lists_the_formats() -> None:
    with pytest.raises(InvalidInput) as caught:
        export_render(result=RESULT, fmt="docx")
    assert caught.value.message == "Unknown export format 'docx'; one of: json, bibtex, markdown."
    assert EXPORT_FORMATS == ("json", "bibtex", "markdown")


def test_a_result_without_papers_still_renders() -> None:
    empty = {"query": "nothing", "plan": None, "papers": None}
    assert "No papers." in export_render(result=empty, fmt="markdown")
    assert export_render(result=empty, fmt="bibtex") == ""


@pytest.mark.parametrize("fmt", ["markdown", "bibtex"])
def test_exports_lose_what_reorders_or_hides_a_title(fmt: str) -> None:
    """A job stored before sources were cleaned: its export is cleaned all the same. Shown failing
    before: both exports carried the override and the zero-width space."""
    result = {
        **RESULT,
        "papers": [
            {"title": "Safe \u202eetirw\u200b title", "authors": ["Do\u200be, J."], "doi": "10.1000/x"}
        ],
    }
    text = export_render(result=result, fmt=fmt)
    assert "\u202e" not in text
    assert "\u200b" not in text
    assert "etirw" in text

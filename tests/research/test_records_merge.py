"""papers_merge, over any list of records: one record per DOI and per normalised title, in
first-seen order, nothing lost, every source kept, and merging twice changes nothing."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from research.records import Paper, papers_merge, title_normalize

# Few distinct values, so that collisions (the interesting cases) are common.
_titles = st.sampled_from(
    ["Deep learning", "DEEP  learning!", "Déep Learning", "Attention", "attention.", "", "?"]
)
_dois = st.sampled_from(["", "", "10.1038/nature14539", "10.1000/other", "10.48550/arxiv.1706.03762"])
_papers = st.builds(
    Paper,
    title=_titles,
    doi=_dois,
    year=st.one_of(st.none(), st.integers(1990, 2025)),
    venue=st.sampled_from(["", "Nature", "arXiv"]),
    sources=st.sampled_from([("openalex",), ("crossref",), ("arxiv",), ("library",)]),
)
_lists = st.lists(_papers, max_size=12)


def _identifiable(paper: Paper) -> bool:
    return bool(paper.doi or title_normalize(paper.title))


@settings(max_examples=300)
@given(_lists)
def test_no_two_merged_records_share_a_doi(papers: list[Paper]) -> None:
    dois = [p.doi for p in papers_merge(papers) if p.doi]
    assert len(dois) == len(set(dois))


@settings(max_examples=300)
@given(_lists)
def test_records_without_dois_never_share_a_title_with_another(papers: list[Paper]) -> None:
    merged = papers_merge(papers)
    for paper in merged:
        if not paper.doi and title_normalize(paper.title):
            same = [p for p in merged if title_normalize(p.title) == title_normalize(paper.title)]
            assert same == [paper]


@settings(max_examples=300)
@given(_lists)
def test_every_identifiable_paper_is_in_exactly_one_merged_record(papers: list[Paper]) -> None:
    # Each input marked by a key of its own in ids, which a merge unions.
    marked = [replace(p, ids={f"input{i}": p.sources[0]}) for i, p in enumerate(papers)]
    merged = papers_merge(marked)
    for i, paper in enumerate(marked):
        holders = [m for m in merged if f"input{i}" in m.ids]
        assert len(holders) == (1 if _identifiable(paper) else 0)
        if holders:
            assert set(paper.sources) <= set(holders[0].sources)


@settings(max_examples=300)
@given(_lists)
def test_first_seen_order_is_kept(papers: list[Paper]) -> None:
    numbered = [replace(p, ids={"n": str(i)}) for i, p in enumerate(papers)]
    # A merged record keeps its first input's ids over later ones'.
    firsts = [int(m.ids["n"]) for m in papers_merge(numbered)]
    assert firsts == sorted(firsts)


@settings(max_examples=300)
@given(_lists)
def test_merging_twice_changes_nothing(papers: list[Paper]) -> None:
    once = papers_merge(papers)
    assert papers_merge(once) == once


@given(_lists)
def test_records_with_neither_title_nor_doi_are_dropped_and_the_rest_kept_unique(papers: list[Paper]) -> None:
    merged = papers_merge(papers)
    assert all(_identifiable(p) for p in merged)
    assert len(merged) <= len([p for p in papers if _identifiable(p)])


def test_a_merged_record_fills_gaps_from_later_ones_and_lists_every_source() -> None:
    first = Paper(title="Deep learning", sources=("arxiv",))
    second = Paper(
        title="DEEP learning!", doi="10.1038/nature14539", year=2015, venue="Nature", sources=("crossref",)
    )

    [merged] = papers_merge([first, second])

    assert (merged.title, merged.doi, merged.year, merged.venue) == (
        "Deep learning",
        "10.1038/nature14539",
        2015,
        "Nature",
    )
    assert merged.sources == ("arxiv", "crossref")

"""OpenAlex, Crossref and arXiv read from recordings of their documented answers: each one's
fields land in the right place of a Paper, and the plan's terms, years and limit reach the query."""

from __future__ import annotations

import httpx

from research.sources.base import SearchPlan
from research.sources.registry import source_get

ATTENTION_ABSTRACT_START = "The dominant sequence transduction models are based on complex recurrent"


def _plan(*terms: str, year_from: int | None = None, year_to: int | None = None) -> SearchPlan:
    return SearchPlan(
        terms=terms or ("transformer", "self attention"),
        year_from=year_from,
        year_to=year_to,
        sources=("openalex", "crossref", "arxiv"),
        max_results=50,
    )


def test_openalex_search_reads_titles_authors_venues_and_rebuilds_abstracts(
    replay: list[httpx.Request],
) -> None:
    papers = source_get("openalex").search(plan=_plan(), tenant_id=1, limit=10)

    assert [p.title for p in papers][:2] == [
        "Attention Is All You Need",
        "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
    ]
    attention = papers[0]
    assert attention.doi == "10.48550/arxiv.1706.03762"
    assert attention.authors[0] == "Ashish Vaswani"
    assert "Łukasz Kaiser" in attention.authors
    assert attention.year == 2017
    assert attention.venue == "arXiv (Cornell University)"
    assert attention.abstract.startswith(ATTENTION_ABSTRACT_START)
    assert attention.abstract.endswith("with large and limited training data.")
    assert attention.sources == ("openalex",)
    assert attention.ids == {"openalex": "W2963403868"}
    params = replay[0].url.params
    assert params["search"] == 'transformer "self attention"'
    assert params["per-page"] == "10"
    assert params["mailto"] == "librarian@example.org"
    assert "filter" not in params


def test_openalex_search_filters_by_publication_year(replay: list[httpx.Request]) -> None:
    openalex = source_get("openalex")
    assert {
        p.year for p in openalex.search(plan=_plan(year_from=2019, year_to=2019), tenant_id=1, limit=10)
    } == {2019}
    openalex.search(plan=_plan(year_from=2020), tenant_id=1, limit=10)
    openalex.search(plan=_plan(year_to=2018), tenant_id=1, limit=10)
    assert [r.url.params["filter"] for r in replay] == [
        "publication_year:2019-2019",
        "publication_year:>2019",
        "publication_year:<2019",
    ]


def test_openalex_pages_through_results_two_hundred_at_a_time(transport_answering) -> None:
    asked: list[tuple[str, str]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        per_page, page = request.url.params["per-page"], request.url.params["page"]
        asked.append((per_page, page))
        works = [
            {"id": f"https://openalex.org/W{page}{i}", "title": f"Paper {page}-{i}"}
            for i in range(int(per_page))
        ]
        return httpx.Response(200, json={"meta": {}, "results": works})

    transport_answering(handle)
    papers = source_get("openalex").search(plan=_plan(), tenant_id=1, limit=450)

    assert len(papers) == 450
    assert asked == [("200", "1"), ("200", "2"), ("50", "3")]


def test_openalex_looks_up_a_doi_and_answers_none_for_an_unknown_one(replay: list[httpx.Request]) -> None:
    openalex = source_get("openalex")
    resnet = openalex.lookup_doi(doi="10.1109/CVPR.2016.90", tenant_id=1)

    assert resnet is not None
    assert resnet.title == "Deep Residual Learning for Image Recognition"
    assert resnet.authors == ("Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun")
    assert openalex.lookup_doi(doi="10.9999/no-such-paper", tenant_id=1) is None
    assert replay[0].url.path == "/openalex/works/doi:10.1109/cvpr.2016.90"


def test_crossref_search_reads_title_lists_given_and_family_names_and_jats_abstracts(
    replay: list[httpx.Request],
) -> None:
    papers = source_get("crossref").search(plan=_plan(year_from=2019, year_to=2020), tenant_id=1, limit=3)

    assert [p.doi for p in papers] == [
        "10.18653/v1/n19-1423",
        "10.18653/v1/p19-1285",
        "10.18653/v1/2020.emnlp-demos.6",
    ]
    bert = papers[0]
    assert bert.title == "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"
    assert bert.authors == ("Jacob Devlin", "Ming-Wei Chang", "Kenton Lee", "Kristina Toutanova")
    assert bert.year == 2019
    assert bert.venue == "Proceedings of the 2019 Conference of the North"
    assert bert.abstract == ""
    assert papers[1].abstract.startswith("Transformers have a potential of learning longer-term dependency")
    assert "<" not in papers[2].abstract
    assert papers[2].abstract.startswith("Recent progress in natural language")
    params = replay[0].url.params
    assert params["query"] == 'transformer "self attention"'
    assert params["rows"] == "3"
    assert params["filter"] == "from-pub-date:2019,until-pub-date:2020"
    assert params["mailto"] == "librarian@example.org"


def test_crossref_looks_up_a_doi_and_answers_none_for_an_unknown_one(replay: list[httpx.Request]) -> None:
    crossref = source_get("crossref")
    bert = crossref.lookup_doi(doi="https://doi.org/10.18653/V1/N19-1423", tenant_id=1)

    assert bert is not None
    assert bert.title.startswith("BERT")
    assert bert.sources == ("crossref",)
    assert crossref.lookup_doi(doi="10.9999/no-such-paper", tenant_id=1) is None


def test_arxiv_search_builds_its_query_syntax_and_reads_the_atom_feed(replay: list[httpx.Request]) -> None:
    papers = source_get("arxiv").search(plan=_plan(), tenant_id=1, limit=10)

    assert [p.ids["arxiv"] for p in papers] == [
        "1706.03762",
        "1810.04805",
        "1901.02860",
        "2010.11929",
        "2005.14165",
        "1512.03385",
    ]
    attention, bert = papers[0], papers[1]
    assert attention.doi == "10.48550/arxiv.1706.03762"
    assert attention.year == 2017
    assert attention.venue == "arXiv"
    assert attention.abstract.startswith(ATTENTION_ABSTRACT_START)
    assert attention.url == "https://arxiv.org/abs/1706.03762"
    # Titles wrap across lines in the feed.
    assert bert.title == "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"
    assert papers[2].venue == "ACL 2019"
    # A journal DOI the authors gave wins over arXiv's own.
    assert papers[5].doi == "10.1109/cvpr.2016.90"
    params = replay[0].url.params
    assert params["search_query"] == 'all:transformer AND all:"self attention"'
    assert params["max_results"] == "10"


def test_arxiv_search_limits_submission_dates_and_results(replay: list[httpx.Request]) -> None:
    papers = source_get("arxiv").search(plan=_plan(year_from=2020, year_to=2020), tenant_id=1, limit=1)

    assert [p.ids["arxiv"] for p in papers] == ["2010.11929"]
    assert replay[0].url.params["search_query"] == (
        '(all:transformer AND all:"self attention") AND submittedDate:[202001010000 TO 202012312359]'
    )
    assert replay[0].url.params["max_results"] == "1"


def test_arxiv_looks_up_only_its_own_dois(replay: list[httpx.Request]) -> None:
    arxiv = source_get("arxiv")
    paper = arxiv.lookup_doi(doi="10.48550/arXiv.1706.03762", tenant_id=1)

    assert paper is not None
    assert paper.title == "Attention Is All You Need"
    assert replay[0].url.params["id_list"] == "1706.03762"
    assert arxiv.lookup_doi(doi="10.1109/CVPR.2016.90", tenant_id=1) is None
    assert arxiv.lookup_doi(doi="10.48550/arXiv.0000.00000", tenant_id=1) is None
    assert len(replay) == 2


def test_without_a_contact_email_no_mailto_is_sent(replay: list[httpx.Request], settings) -> None:
    settings.GATEHOUSE = {**settings.GATEHOUSE, "RESEARCH_CONTACT_EMAIL": None}
    source_get("openalex").search(plan=_plan(), tenant_id=1, limit=5)
    source_get("crossref").search(plan=_plan(), tenant_id=1, limit=5)

    assert all("mailto" not in request.url.params for request in replay)
    assert all("mailto" not in request.headers["User-Agent"] for request in replay)

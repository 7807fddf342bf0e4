"""Every way a public source can fail is a SourceError naming the source and the reason, never the
URL or the contact email; hostile content is cleaned and bounded, never stored as sent."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from research.sources import http
from research.sources.base import SearchPlan, SourceError
from research.sources.registry import source_get
from tests.research.replay_server import RECORDINGS

PUBLIC = ("openalex", "crossref", "arxiv")
TITLES = {"openalex": "OpenAlex", "crossref": "Crossref", "arxiv": "arXiv"}
PLAN = SearchPlan(terms=("graph",), year_from=None, year_to=None, sources=PUBLIC, max_results=10)
Install = Callable[[Callable[[httpx.Request], httpx.Response]], None]


def _search_error(name: str) -> str:
    with pytest.raises(SourceError) as caught:
        source_get(name).search(plan=PLAN, tenant_id=1, limit=10)
    message = caught.value.message
    assert message.startswith(TITLES[name])
    assert "replay.test" not in message
    assert "librarian" not in message
    assert "http" not in message
    return message


def _raising(error: type[Exception]) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        raise error("boom at " + str(request.url), request=request)  # type: ignore[call-arg]

    return handle


@pytest.mark.parametrize("name", PUBLIC)
def test_a_refused_connection_is_unreachable(name: str, transport_answering: Install) -> None:
    transport_answering(_raising(httpx.ConnectError))
    assert _search_error(name).endswith("could not be reached (ConnectError).")


@pytest.mark.parametrize("name", PUBLIC)
def test_a_timeout_says_so(name: str, transport_answering: Install) -> None:
    transport_answering(_raising(httpx.ReadTimeout))
    assert _search_error(name).endswith("did not answer in time.")


@pytest.mark.parametrize("name", PUBLIC)
@pytest.mark.parametrize("status", [400, 403, 404, 500, 503])
def test_an_error_status_names_the_status(name: str, status: int, transport_answering: Install) -> None:
    transport_answering(lambda request: httpx.Response(status, text=f"error for {request.url}"))
    assert _search_error(name).endswith(f"answered with an error (HTTP {status}).")


@pytest.mark.parametrize("name", PUBLIC)
def test_rate_limiting_asks_to_try_later(name: str, transport_answering: Install) -> None:
    transport_answering(lambda request: httpx.Response(429, headers={"Retry-After": "60"}))
    assert "limiting requests (HTTP 429)" in _search_error(name)


@pytest.mark.parametrize("name", ["openalex", "crossref"])
@pytest.mark.parametrize(
    "body",
    [b"<html>not json</html>", b"{", b"\xff\xfe\x00", b"[" * 100_000 + b"]" * 100_000],
    ids=["html", "truncated", "not-utf8", "deeply-nested"],
)
def test_invalid_json_is_refused(name: str, body: bytes, transport_answering: Install) -> None:
    transport_answering(lambda request: httpx.Response(200, content=body))
    assert _search_error(name).endswith("answered with invalid JSON.")


@pytest.mark.parametrize(
    "answer",
    [[], {"results": None}, {"results": {"a": 1}}, {"results": ["a string"]}, "text", None],
)
def test_openalex_answers_in_another_shape_are_refused(answer: object, transport_answering: Install) -> None:
    transport_answering(_json_answer(answer))
    assert _search_error("openalex").endswith("answered in an unexpected shape.")


@pytest.mark.parametrize(
    "answer",
    [{}, {"message": None}, {"message": {"items": "x"}}, {"message": {"items": [1]}}, [1, 2]],
)
def test_crossref_answers_in_another_shape_are_refused(answer: object, transport_answering: Install) -> None:
    transport_answering(lambda request: httpx.Response(200, json=answer))
    assert _search_error("crossref").endswith("answered in an unexpected shape.")


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b"<feed xmlns='http://www.w3.org/2005/Atom'><entry>",
        b"<rss><channel></channel></rss>",
        b"/etc/hostname",
    ],
    ids=["json", "truncated", "rss", "a-file-path"],
)
def test_arxiv_invalid_xml_is_refused(body: bytes, transport_answering: Install) -> None:
    transport_answering(lambda request: httpx.Response(200, content=body))
    assert _search_error("arxiv").endswith("answered with invalid XML.")


def test_arxiv_error_feed_is_a_refused_query(transport_answering: Install) -> None:
    # arXiv reports a bad query as a feed of one "Error" entry, with HTTP 200.
    error_feed = (RECORDINGS / "arxiv" / "error.xml").read_bytes()
    transport_answering(lambda request: httpx.Response(200, content=error_feed))
    assert _search_error("arxiv") == "arXiv refused the query."


@pytest.mark.parametrize("name", PUBLIC)
def test_an_answer_declared_too_large_is_refused(name: str, transport_answering: Install) -> None:
    size = str(http.RESPONSE_MAX_BYTES + 1)
    transport_answering(lambda request: httpx.Response(200, headers={"Content-Length": size}, content=b""))
    assert _search_error(name).endswith("answer is too large.")


@pytest.mark.parametrize("name", PUBLIC)
def test_an_answer_streaming_past_the_cap_is_refused(
    name: str, transport_answering: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "RESPONSE_MAX_BYTES", 1000)

    def chunks() -> object:
        for _ in range(100):
            yield b"x" * 100

    transport_answering(lambda request: httpx.Response(200, content=chunks()))  # type: ignore[arg-type]
    assert _search_error(name).endswith("answer is too large.")


@pytest.mark.parametrize("name", ["openalex", "crossref"])
def test_a_doi_lookup_fails_like_a_search(name: str, transport_answering: Install) -> None:
    transport_answering(lambda request: httpx.Response(502))
    with pytest.raises(SourceError, match=r"HTTP 502"):
        source_get(name).lookup_doi(doi="10.1000/x", tenant_id=1)


HOSTILE = "Bad\x00 title\x07 with \ud800 surrogate\x1b[31m"


def _openalex_work(**fields: object) -> dict[str, object]:
    return {"id": "https://openalex.org/W1", "title": "Fine", "doi": "https://doi.org/10.1000/one", **fields}


def _json_answer(data: object) -> Callable[[httpx.Request], httpx.Response]:
    # json.dumps writes lone surrogates as \ud800 escapes, as a hostile server would.
    body = json.dumps(data).encode()
    return lambda request: httpx.Response(200, content=body)


def test_openalex_hostile_strings_are_cleaned_and_bounded(transport_answering: Install) -> None:
    many = [{"author": {"display_name": f"Author\x00 {i}"}} for i in range(150)]
    index = {"word": [0, 1, 10**9, -5, "x", True], "\x00evil": [2], "a" * 10: [3]}
    work = _openalex_work(
        title=HOSTILE + "x" * 5000,
        authorships=many,
        abstract_inverted_index=index,
        primary_location={
            "source": {"display_name": ["not", "a", "string"]},
            "landing_page_url": "javascript:x",
        },
        publication_year="2017",
    )
    transport_answering(_json_answer({"results": [work, _openalex_work(title=None, doi=None), 5]}))
    with pytest.raises(SourceError, match="unexpected shape"):
        source_get("openalex").search(plan=PLAN, tenant_id=1, limit=10)

    transport_answering(_json_answer({"results": [work, _openalex_work(title=None, doi=None)]}))
    [paper] = source_get("openalex").search(plan=PLAN, tenant_id=1, limit=10)

    assert paper.title.startswith("Bad title with surrogate[31m")
    assert len(paper.title) == http.TITLE_MAX_CHARS
    assert len(paper.authors) == http.AUTHORS_MAX
    assert paper.authors[0] == "Author 0"
    assert paper.abstract == "word word evil aaaaaaaaaa"
    assert paper.venue == ""
    assert paper.year is None
    assert paper.url == "https://doi.org/10.1000/one"


def test_crossref_hostile_strings_are_cleaned_and_bounded(transport_answering: Install) -> None:
    item = {
        "DOI": "10.1000/ok",
        "title": [None, HOSTILE],
        "author": [{"given": "A\x00da", "family": "Love\ud800lace"}, "junk", {"name": "Consortium\x01"}],
        "abstract": "<jats:p>" + "<script>alert(1)</script>" + "long " * 10_000 + "</jats:p>",
        "published": {"date-parts": [["2019"]]},
        "issued": {"date-parts": [[2018, 1]]},
        "URL": "ftp://example.org",
    }
    transport_answering(_json_answer({"message": {"items": [item, {"title": [], "DOI": "nonsense"}]}}))
    [paper] = source_get("crossref").search(plan=PLAN, tenant_id=1, limit=10)

    assert paper.title == "Bad title with surrogate[31m"
    assert paper.authors == ("Ada Lovelace", "Consortium")
    assert paper.abstract.startswith("alert(1) long long")
    assert len(paper.abstract) <= http.ABSTRACT_MAX_CHARS
    assert paper.year == 2018
    assert paper.url == "https://doi.org/10.1000/ok"


def test_arxiv_hostile_strings_are_cleaned(transport_answering: Install) -> None:
    feed = (
        '<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
        "<entry><id>http://arxiv.org/abs/2101.00001v1</id><published>2021-01-01T00:00:00Z</published>"
        "<title>Evil\n\t title &lt;script&gt;\u202e</title><summary>"
        + "word " * 6000
        + "</summary>"
        + "<author><name>A</name></author>" * 150
        + "</entry></feed>"
    ).encode()
    transport_answering(lambda request: httpx.Response(200, content=feed))
    [paper] = source_get("arxiv").search(plan=PLAN, tenant_id=1, limit=10)

    # Shown failing before: the right-to-left override reached the screening page and exports.
    assert paper.title == "Evil title <script>"
    assert len(paper.authors) == http.AUTHORS_MAX
    assert len(paper.abstract) <= http.ABSTRACT_MAX_CHARS
    assert paper.doi == "10.48550/arxiv.2101.00001"


def test_arxiv_quotes_in_terms_cannot_break_out_of_a_phrase(replay: list[httpx.Request]) -> None:
    plan = SearchPlan(
        terms=('graph" OR all:"x',), year_from=None, year_to=None, sources=("arxiv",), max_results=5
    )
    source_get("arxiv").search(plan=plan, tenant_id=1, limit=5)
    assert replay[0].url.params["search_query"] == 'all:"graph  OR all: x"'

"""The replay server other tests point the sources at: real HTTP on loopback, the recordings by
default, and per source an HTTP 500 or a hang when asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_django.fixtures import Settings

from research.sources.base import SearchPlan, SourceError
from research.sources.registry import source_get
from tests.research.replay_server import ReplayServer

PLAN = SearchPlan(terms=("transformer",), year_from=None, year_to=None, sources=(), max_results=3)


@pytest.fixture
def server(settings: Settings) -> Iterator[ReplayServer]:
    with ReplayServer(hang_seconds=5) as server:
        settings.GATEHOUSE = {**settings.GATEHOUSE, **server.settings(), "RESEARCH_HTTP_TIMEOUT_SECONDS": 1}
        yield server


def test_each_source_answers_from_its_recordings(server: ReplayServer) -> None:
    assert server.url_for("arxiv").endswith("/arxiv/api/query")
    titles = {
        name: [p.title for p in source_get(name).search(plan=PLAN, tenant_id=1, limit=3)]
        for name in ("openalex", "crossref", "arxiv")
    }

    assert titles["openalex"][0] == "Attention Is All You Need"
    assert titles["crossref"][0].startswith("BERT")
    assert titles["arxiv"][0] == "Attention Is All You Need"
    assert all(len(found) == 3 for found in titles.values())
    assert source_get("crossref").lookup_doi(doi="10.1109/cvpr.2016.90", tenant_id=1) is not None
    assert server.requests("openalex")[0][1]["search"] == ["transformer"]


def test_a_source_set_to_error_answers_500_and_the_others_still_answer(server: ReplayServer) -> None:
    server.set_mode("crossref", "error")

    with pytest.raises(SourceError, match=r"Crossref answered with an error \(HTTP 500\)"):
        source_get("crossref").search(plan=PLAN, tenant_id=1, limit=3)
    assert source_get("openalex").search(plan=PLAN, tenant_id=1, limit=3)

    server.set_mode("crossref", "ok")
    assert source_get("crossref").search(plan=PLAN, tenant_id=1, limit=3)


def test_a_hanging_source_times_out(server: ReplayServer) -> None:
    server.set_mode("arxiv", "hang")

    with pytest.raises(SourceError, match="arXiv did not answer in time"):
        source_get("arxiv").search(plan=PLAN, tenant_id=1, limit=3)


def test_unknown_sources_and_modes_are_refused(server: ReplayServer) -> None:
    with pytest.raises(ValueError, match="source one of"):
        server.set_mode("library", "error")
    with pytest.raises(ValueError, match="source one of"):
        server.set_mode("arxiv", "slow")


def test_a_short_hang_delays_the_answer_without_failing_it(server: ReplayServer) -> None:
    server.set_mode("openalex", "hang", hang_seconds=0.2)

    assert source_get("openalex").search(plan=PLAN, tenant_id=1, limit=3)
    assert len(server.requests("openalex")) == 1


def test_every_recording_can_be_made_again_from_its_api() -> None:
    """tests/research/record_sources.py knows the request behind every recorded file."""
    from tests.research.record_sources import RECORDINGS, RECORDINGS_MADE

    on_disk = {str(path.relative_to(RECORDINGS)) for path in RECORDINGS.rglob("*") if path.is_file()}
    assert on_disk == {recording.file for recording in RECORDINGS_MADE}

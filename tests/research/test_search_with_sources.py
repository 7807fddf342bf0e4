"""The literature search over the public sources, served by the replay server: records found by
several sources merge into one, a failing source is reported while the others' papers are kept,
an added DOI is looked up, and the result exports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from accounts.models import Membership
from jobs.models import Job, JobState
from jobs.services import job_start
from research.bibtex import library_import_bibtex
from research.exports import export_render
from tests.jobs.support import job_decide_pending, steps_run
from tests.research.replay_server import ReplayServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(settings: Settings) -> Iterator[ReplayServer]:
    with ReplayServer(hang_seconds=5) as server:
        settings.GATEHOUSE = {
            **settings.GATEHOUSE,
            **server.settings(),
            "RESEARCH_SOURCES": ["openalex", "crossref", "arxiv", "library"],
            "RESEARCH_HTTP_TIMEOUT_SECONDS": 2,
        }
        yield server


def _job(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_search_across_sources_merges_reports_failures_and_resolves_added_dois(
    owner: Membership, server: ReplayServer
) -> None:
    library_import_bibtex(
        tenant_id=owner.tenant_id,
        text="@article{v, title = {Attention is all you need}, doi = {10.48550/arXiv.1706.03762}}",
    )
    server.set_mode("crossref", "error")
    server.set_mode("arxiv", "hang")
    ids: dict[str, Any] = {"tenant_id": owner.tenant_id, "user_id": owner.user_id}
    job = job_start(**ids, kind="literature_search", job_input={"query": "attention", "max_results": 20})
    steps_run()
    job_decide_pending(**ids, job_id=job.pk, action="approve")
    steps_run()

    job = _job(job)
    assert job.checkpoint_kind == "screening", job.error
    checkpoint = job.checkpoint or {}
    assert set(checkpoint["failures"]) == {"crossref", "arxiv"}
    assert checkpoint["failures"]["crossref"] == "Crossref answered with an error (HTTP 500)."
    assert checkpoint["failures"]["arxiv"] == "arXiv did not answer in time."
    attention = [c for c in checkpoint["candidates"] if c["doi"] == "10.48550/arxiv.1706.03762"]
    assert len(attention) == 1
    assert attention[0]["sources"] == ["openalex", "library"]
    assert len(checkpoint["candidates"]) == 5

    server.set_mode("crossref", "ok")
    job_decide_pending(
        **ids, job_id=job.pk, action="edit", data={"keep": ["p1"], "add_dois": ["10.1109/CVPR.2016.90"]}
    )
    steps_run()
    job = _job(job)
    assert job.checkpoint_kind == "final", job.error
    papers = (job.checkpoint or {})["papers"]
    assert [p["title"] for p in papers] == [
        "Attention Is All You Need",
        "Deep Residual Learning for Image Recognition",
    ]
    assert papers[1]["sources"] == ["crossref"]

    job_decide_pending(**ids, job_id=job.pk, action="approve")
    job = _job(job)
    assert job.state == JobState.COMPLETE
    bibtex = export_render(result=job.result or {}, fmt="bibtex")
    assert "@misc{vaswani2017attention," in bibtex or "@article{vaswani2017attention," in bibtex
    assert "doi = {10.1109/cvpr.2016.90}" in bibtex

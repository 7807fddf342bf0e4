from __future__ import annotations

import pytest

from jobs.models import Job, JobState
from jobs.services import job_start
from research.models import LibraryPaper
from tests.jobs.support import job_decide_pending, steps_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_literature_search_on_the_library_runs_to_completion(owner, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "RESEARCH_SOURCES": ["library"]}
    LibraryPaper.objects.create(
        tenant=owner.tenant,
        title="Attention is all you need",
        title_key="attention is all you need",
        authors=["Ashish Vaswani"],
        year=2017,
        doi="10.5555/attention",
        abstract="transformers",
    )
    job = job_start(
        tenant_id=owner.tenant_id,
        user_id=owner.user_id,
        kind="literature_search",
        job_input={"query": "attention"},
    )
    steps_run()
    job.refresh_from_db()
    assert job.state == JobState.WAITING
    assert job.checkpoint_kind == "plan"
    job_decide_pending(tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=job.pk, action="approve")
    steps_run()
    job.refresh_from_db()
    assert job.checkpoint_kind == "screening", job.error
    assert [c["title"] for c in (job.checkpoint or {})["candidates"]] == ["Attention is all you need"]
    job_decide_pending(tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=job.pk, action="approve")
    job.refresh_from_db()
    assert job.checkpoint_kind == "final"
    job_decide_pending(tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=job.pk, action="approve")
    job = Job.objects.get(pk=job.pk)
    assert job.state == JobState.COMPLETE
    assert (job.result or {})["paper_count"] == 1
    assert job.iteration == 2
    assert job.decisions.count() == 3

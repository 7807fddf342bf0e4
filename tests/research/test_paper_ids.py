"""A paper's id (p1, p2, ...) means that paper for the whole literature search (issue 36, finding 12).

The finding: ids were the papers' places in each list, so the paper shown as p4 at screening was p2
at the final checkpoint, and "keep p4" there kept the wrong paper or none. Here, ids noted at
screening name the same papers at the final checkpoint, in the result and in the page's form; a
refined search gives the papers it finds again their ids and new papers ids never used; an id not
shown at the checkpoint being decided is refused by name; and a job stored before ids were kept
goes on with the numbers it showed.

The library (``tool_support.LIBRARY``) answers "learning" with, newest first: Radford (2021, no
DOI), BERT (2019), Attention (2017), ResNet (2016).
"""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.test import Client
from mcp_types import TextContent

from core.errors import InvalidInput
from jobs.checkpoints import checkpoint_name
from jobs.models import Job, JobDecision, JobState
from research import services, tools
from research.paper_ids import KEEP_NOT_IDS, KEEP_UNKNOWN, papers_identified
from research.records import Paper
from tests.jobs.support import job_decide_pending, steps_run
from tests.research.tool_support import LIBRARY, StepsPump, library_fill, tool_call
from tests.support.conversation_support import visible_text
from tests.support.workflow_support import identity_for

pytestmark = pytest.mark.django_db(transaction=True)

ATTENTION, RESNET, BERT, RADFORD = (title for title, *_ in LIBRARY)


@pytest.fixture
def library(owner):
    return library_fill(tenant=owner.tenant)


def _started(owner) -> Job:
    job = services.search_start(tenant_id=owner.tenant_id, user_id=owner.user_id, query="learning")
    steps_run()
    return Job.objects.get(pk=job.pk)


def _decided(owner, job: Job, action: str, data: dict[str, Any] | None = None) -> Job:
    job_decide_pending(
        tenant_id=owner.tenant_id, user_id=owner.user_id, job_id=job.pk, action=action, data=data
    )
    steps_run()
    return Job.objects.get(pk=job.pk)


def _screening(owner, plan: dict[str, Any] | None = None) -> Job:
    job = _started(owner)
    job = _decided(owner, job, "edit" if plan else "approve", plan)
    assert (job.state, job.checkpoint_kind) == (JobState.WAITING, "screening"), job.error
    return job


def _shown(job: Job) -> dict[str, str]:
    """Title -> id of the papers the pending checkpoint lists."""
    checkpoint = job.checkpoint or {}
    papers = checkpoint["candidates"] if job.checkpoint_kind == "screening" else checkpoint["papers"]
    return {paper["title"]: paper["id"] for paper in papers}


def _final(owner, keep: list[str]) -> tuple[Job, dict[str, str]]:
    """At the final checkpoint with the papers ``keep`` names (titles), kept by their screening ids;
    the ids noted at screening."""
    job = _screening(owner)
    noted = _shown(job)
    job = _decided(owner, job, "edit", {"keep": [noted[title] for title in keep]})
    assert job.checkpoint_kind == "final", job.error
    return job, noted


def test_the_papers_kept_at_screening_keep_their_ids_at_the_final_checkpoint(owner, library):
    job, noted = _final(owner, [RESNET, BERT])
    assert _shown(job) == {RESNET: noted[RESNET], BERT: noted[BERT]}


def test_the_result_lists_the_papers_with_the_ids_they_had_at_screening(owner, library):
    job, noted = _final(owner, [RESNET, BERT])
    job = _decided(owner, job, "approve")
    assert job.state == JobState.COMPLETE, job.error
    papers = (job.result or {})["papers"]
    assert {paper["title"]: paper["id"] for paper in papers} == {RESNET: noted[RESNET], BERT: noted[BERT]}


def test_approve_all_carries_every_candidate_s_id_to_the_final_checkpoint(owner, library):
    job = _screening(owner)
    noted = _shown(job)
    job = _decided(owner, job, "approve")
    assert _shown(job) == noted


def test_keeping_at_final_by_an_id_noted_at_screening_keeps_that_paper(owner, library):
    job, noted = _final(owner, [BERT, RESNET])
    job = _decided(owner, job, "edit", {"keep": [noted[RESNET]]})
    assert [paper["title"] for paper in (job.checkpoint or {})["papers"]] == [RESNET]


def test_an_id_shown_at_screening_but_not_at_final_is_refused_by_name(owner, library):
    job, noted = _final(owner, [BERT, RESNET])
    with pytest.raises(InvalidInput) as refused:
        job_decide_pending(
            tenant_id=owner.tenant_id,
            user_id=owner.user_id,
            job_id=job.pk,
            action="edit",
            data={"keep": [noted[RESNET], noted[RADFORD]]},
        )
    assert refused.value.message == KEEP_UNKNOWN.format(checkpoint="final", names=f"'{noted[RADFORD]}'")


def test_a_refused_keep_leaves_the_final_checkpoint_as_it_was(owner, library):
    job, noted = _final(owner, [BERT, RESNET])
    with pytest.raises(InvalidInput):
        job_decide_pending(
            tenant_id=owner.tenant_id,
            user_id=owner.user_id,
            job_id=job.pk,
            action="edit",
            data={"keep": [noted[RADFORD]]},
        )
    after = Job.objects.get(pk=job.pk)
    assert (after.checkpoint_kind, after.iteration, _shown(after)) == ("final", job.iteration, _shown(job))
    assert not JobDecision.objects.filter(job=job, checkpoint_kind="final").exists()


def _refined_twice(owner) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Three screenings: 2019 on (Radford, BERT); refined to up to 2017 (Attention, ResNet); then
    refined to every year (all four). What each showed."""
    job = _screening(owner, {"terms": ["learning"], "year_from": 2019, "sources": ["library"]})
    recent = _shown(job)
    job = _decided(owner, job, "reject", {"year_from": None, "year_to": 2017})
    older = _shown(job)
    job = _decided(owner, job, "reject", {"year_to": None})
    assert job.checkpoint_kind == "screening", job.error
    return recent, older, _shown(job)


def test_a_refine_gives_the_papers_it_adds_ids_never_used_before(owner, library):
    recent, older, _ = _refined_twice(owner)
    assert set(recent) == {RADFORD, BERT}
    assert set(older) == {ATTENTION, RESNET}
    assert set(recent.values()).isdisjoint(older.values())


def test_a_paper_found_again_by_a_refine_keeps_its_id(owner, library):
    recent, older, everything = _refined_twice(owner)
    assert everything == {**recent, **older}


def test_a_dropped_candidate_added_back_by_doi_gets_its_id_back(owner, library):
    job = _screening(owner)
    noted = _shown(job)
    attention_doi = next(doi for title, _, _, doi in LIBRARY if title == ATTENTION)
    job = _decided(owner, job, "edit", {"keep": [noted[BERT]], "add_dois": [attention_doi]})
    assert _shown(job) == {BERT: noted[BERT], ATTENTION: noted[ATTENTION]}


def test_a_doi_added_at_screening_gets_an_id_no_candidate_has(owner, library):
    job = _screening(owner)
    noted = _shown(job)
    job = _decided(owner, job, "edit", {"keep": [noted[BERT]], "add_dois": ["10.9999/nowhere"]})
    added = _shown(job)["DOI 10.9999/nowhere"]
    assert added not in noted.values()


def test_a_paper_known_by_its_title_keeps_its_id_when_a_source_gives_its_doi():
    first, ids = papers_identified(context={}, papers=[Paper(title="Graph attention networks")])
    again, _ = papers_identified(
        context=ids, papers=[Paper(title="Graph Attention Networks.", doi="10.5555/GAT")]
    )
    assert again[0]["id"] == first[0]["id"]


def test_two_papers_of_one_title_and_two_dois_get_two_ids():
    first, ids = papers_identified(context={}, papers=[Paper(title="Erratum", doi="10.5555/one")])
    again, _ = papers_identified(context=ids, papers=[Paper(title="Erratum", doi="10.5555/two")])
    assert again[0]["id"] != first[0]["id"]


def test_the_page_s_keep_boxes_post_the_ids_noted_at_screening(owner, library):
    job, noted = _final(owner, [BERT, RESNET])
    browser = Client(headers={"accept": "text/html"})
    browser.force_login(owner.user)
    page = browser.get(f"/research/{job.pk}/").content.decode()
    assert f'name="keep" value="{noted[RESNET]}"' in page
    name = checkpoint_name(kind="final", iteration=job.iteration)
    posted = browser.post(
        f"/research/{job.pk}/decide/", {"checkpoint": name, "decision": "keep", "keep": [noted[RESNET]]}
    )
    assert posted.status_code == 302, posted.content.decode()[:2000]
    job.refresh_from_db()
    assert [paper["title"] for paper in (job.checkpoint or {})["papers"]] == [RESNET]


def test_the_page_shows_each_candidate_s_id_beside_its_title(owner, library):
    job = _screening(owner)
    noted = _shown(job)
    browser = Client(headers={"accept": "text/html"})
    browser.force_login(owner.user)
    page = html.unescape(visible_text(browser.get(f"/research/{job.pk}/").content.decode()))
    assert f"{noted[RESNET]} {RESNET}" in page


def _as_stored_before_ids(job: Job, *, lists: tuple[str, ...]) -> Job:
    """The job as it was stored before ids were kept: no paper in ``lists`` has an id, and the
    context has no bookkeeping of ids."""
    context = {key: value for key, value in job.context.items() if key not in ("paper_ids", "paper_id_next")}
    for name in lists:
        context[name] = [{k: v for k, v in paper.items() if k != "id"} for paper in context[name]]
    Job.objects.filter(pk=job.pk).update(context=context)
    return Job.objects.get(pk=job.pk)


def test_a_job_stored_before_ids_keeps_its_numbers_and_gives_an_added_paper_an_unused_one(owner, library):
    job = _as_stored_before_ids(_screening(owner), lists=("candidates",))
    shown = _shown(job)
    job = _decided(owner, job, "edit", {"keep": [shown[BERT]], "add_dois": ["10.9999/nowhere"]})
    final = _shown(job)
    assert final[BERT] == shown[BERT]
    assert final["DOI 10.9999/nowhere"] not in shown.values()


def test_a_final_checkpoint_stored_before_ids_is_decided_with_the_numbers_it_showed(owner, library):
    job, _ = _final(owner, [BERT, RESNET])
    job = _as_stored_before_ids(job, lists=("candidates", "selection"))
    # What it showed then: the selection numbered in its order.
    shown = {paper["title"]: f"p{index}" for index, paper in enumerate(job.context["selection"], start=1)}
    job = _decided(owner, job, "edit", {"keep": [shown[RESNET]]})
    assert [paper["title"] for paper in (job.checkpoint or {})["papers"]] == [RESNET]


# Through the decide tool: hostile ids are refused with the tool's own error shape, and the final
# checkpoint still waits as it was.


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setattr(tools, "POLL_SECONDS", 0.02)


@pytest.fixture
def alice(owner, library):
    return identity_for(owner)


def _unknown(*names: str, more: str = "") -> str:
    return KEEP_UNKNOWN.format(checkpoint="final", names=", ".join(names) + more)


HOSTILE_KEEPS: list[tuple[object, str]] = [
    ("p1", KEEP_NOT_IDS),
    ({"p1": True}, KEEP_NOT_IDS),
    (-1, KEEP_NOT_IDS),
    ([-1], KEEP_NOT_IDS),
    ([3, 7], KEEP_NOT_IDS),
    ([10**30], KEEP_NOT_IDS),
    ([None], KEEP_NOT_IDS),
    ([True], KEEP_NOT_IDS),
    ([1.5], KEEP_NOT_IDS),
    ([["p1"]], KEEP_NOT_IDS),
    ([{"id": "p1"}], KEEP_NOT_IDS),
    (["p-1"], _unknown("'p-1'")),
    (["p0"], _unknown("'p0'")),
    (["p" + "9" * 10_000], _unknown(repr("p" + "9" * 39))),
    (["p1\u202e"], _unknown("'p1\\u202e'")),
    (["p1\x00"], "data contains a NUL character (\\u0000), which cannot be stored."),
    ([""], _unknown("''")),
    ([f"p{n}" for n in range(100, 112)], _unknown(*(f"'p{n}'" for n in range(100, 110)), more=" and 2 more")),
]


async def test_hostile_ids_are_refused_with_the_tool_s_error_and_the_checkpoint_still_waits(alice):
    with StepsPump():
        call = await tool_call(alice, "search_papers", query="learning")
        session_id = call.structured["session_id"]
        call = await tool_call(alice, "decide", session_id=session_id, action="approve")
        noted = {paper["title"]: paper["id"] for paper in call.structured["checkpoint"]["candidates"]}
        call = await tool_call(
            alice, "decide", session_id=session_id, action="edit", data={"keep": [noted[BERT], noted[RESNET]]}
        )
    assert call.structured["checkpoint"]["kind"] == "final", call.structured
    before = (await tool_call(alice, "get_session", session_id=session_id)).structured
    answers = []
    for keep, _ in HOSTILE_KEEPS:
        refused = await tool_call(alice, "decide", session_id=session_id, action="edit", data={"keep": keep})
        payload = {
            "error": {"code": -32602, "reason": "invalid_data", "message": _text(refused.result.content[0])}
        }
        answers.append(
            (refused.is_error, refused.structured, json.loads(_text(refused.result.content[1])) == payload)
        )
    assert answers == [
        (True, {"error": {"code": -32602, "reason": "invalid_data", "message": message}}, True)
        for _, message in HOSTILE_KEEPS
    ]
    after = (await tool_call(alice, "get_session", session_id=session_id)).structured
    assert after == before


def _text(block: object) -> str:
    assert isinstance(block, TextContent), block
    return block.text

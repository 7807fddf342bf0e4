"""The literature search as a 2026-07-28 task (``research.task_runner``, ``research.task_forms``):
each checkpoint is the task's form, the form's answer the decision (recorded, validated by the
kind, refused without losing anything), and the task is its person's alone."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import Membership
from accounts.scopes import SCOPE_READ
from core.errors import InsufficientScope, InvalidInput, NotFound
from jobs.models import Job, JobDecision, JobState
from jobs.tool_tasks import JobToolTaskRunner, tool_task_get, tool_task_start
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.tool_tasks_2026_07_28 import tool_task_runner, tool_task_runners
from mcp_gateway.kernel.toolset_access import toolset_set_enabled
from research.bibtex import library_import_bibtex
from research.services import search_start
from research.task_runner import (
    literature_task_cancel,
    literature_task_get,
    literature_task_runner,
    literature_task_update,
    literature_tool_task,
)
from tests.jobs.support import steps_run
from tests.jobs.tool_task_support import identity_of

pytestmark = pytest.mark.django_db(transaction=True)

LIBRARY = """
@article{a, title = {Attention is all you need}, year = {2017}, doi = {10.48550/arXiv.1706.03762}}
@article{b, title = {Attention in graphs}, year = {2019}}
"""


@pytest.fixture(autouse=True)
def _research_on(owner, member, outsider):
    for membership in (owner, outsider):
        toolset_set_enabled(
            tenant=membership.tenant, toolset="research", enabled=True, registry=default_registry()
        )


def _job(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def _started(owner: Membership) -> Job:
    library_import_bibtex(tenant_id=owner.tenant_id, text=LIBRARY)
    job = search_start(tenant_id=owner.tenant_id, user_id=owner.user_id, query="attention", max_results=20)
    steps_run()
    return _job(job)


def _accept(key: str, **content: Any) -> dict[str, Any]:
    return {key: {"action": "accept", "content": content}}


def _update(owner: Membership, job: Job, responses: dict[str, Any], **kw: Any) -> Job:
    literature_task_update(identity=identity_of(owner, **kw), task_id=str(job.pk), input_responses=responses)
    steps_run()
    return _job(job)


def test_search_papers_has_its_own_runner_and_only_it_offers_tasks():
    assert tool_task_runner(tool="search_papers") is literature_task_runner
    assert isinstance(tool_task_runner(tool="decide"), JobToolTaskRunner)
    assert literature_task_runner in tool_task_runners()
    registry = default_registry()
    research = registry.toolset("research")
    assert research is not None
    support = {spec.name: spec.task_support for spec in research.tools}
    assert support.pop("search_papers") == "optional"
    assert set(support.values()) == {"forbidden"}


def test_the_plan_checkpoint_is_a_form_with_the_decision_and_the_plan_fields(owner):
    task = literature_tool_task(job=_started(owner))
    assert task.status == "input_required"
    assert task.input_requests is not None
    [(key, request)] = task.input_requests.items()
    assert key == "plan-0"
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "form"
    assert "plan checkpoint" in params["message"]
    assert "attention" in params["message"]
    schema = params["requestedSchema"]
    assert schema["required"] == ["action"]
    assert schema["properties"]["action"]["enum"] == ["approve", "edit", "reject"]
    assert {"terms", "year_from", "year_to", "sources", "max_results", "note"} <= set(schema["properties"])
    assert schema["properties"]["sources"]["items"]["enum"] == ["library"]
    for prop in schema["properties"].values():  # flat: elicitation forms carry no nested objects
        assert prop["type"] in {"string", "integer", "array"}


def test_the_answers_are_the_decisions_through_to_the_result(owner):
    job = _started(owner)
    job = _update(owner, job, _accept("plan-0", action="edit", terms="attention\n\n graphs ", year_from=2016))
    decision = JobDecision.objects.get(job=job, checkpoint_kind="plan")
    assert decision.channel == "mcp-task"
    assert decision.action == "edit"
    assert decision.data == {"terms": ["attention", "graphs"], "year_from": 2016}
    task = literature_tool_task(job=job)
    assert task.status == "input_required", job.error
    assert task.input_requests is not None
    [(key, request)] = task.input_requests.items()
    assert key == "screening-1"
    keep = request["params"]["requestedSchema"]["properties"]["keep"]
    assert [item["const"] for item in keep["items"]["anyOf"]][:1] == ["p1"]
    job = _update(owner, job, _accept(key, action="edit", keep=["p1"], add_dois="", note="only one"))
    assert job.checkpoint_kind == "final"
    assert JobDecision.objects.get(job=job, checkpoint_kind="screening").note == "only one"
    job = _update(owner, job, _accept("final-2", action="approve"))
    task = literature_tool_task(job=job)
    assert task.status == "completed"
    assert task.result is not None
    assert task.result["structuredContent"]["result"]["paper_count"] == 1
    assert "Complete" in task.result["content"][0]["text"]
    assert task.poll_interval_ms is None


def test_a_declined_form_decides_nothing(owner):
    job = _started(owner)
    job = _update(owner, job, {"plan-0": {"action": "decline"}})
    assert job.state == JobState.WAITING
    assert not JobDecision.objects.filter(job=job).exists()


@pytest.mark.parametrize(
    "responses",
    [
        {},  # no answer to the pending request
        {"plan-7": {"action": "accept", "content": {"action": "approve"}}},  # another checkpoint's
        {"plan-0": "approve"},
        {"plan-0": {"action": "yes"}},
        {"plan-0": {"action": "accept"}},
        {"plan-0": {"action": "accept", "content": ["approve"]}},
        {"plan-0": {"action": "accept", "content": {"action": 5}}},
        {"plan-0": {"action": "accept", "content": {"action": "approve", "note": 3}}},
        {"plan-0": {"action": "accept", "content": {"action": "approve", "terms": "x"}}},  # approve + data
        {"plan-0": {"action": "accept", "content": {"action": "edit", "colour": "red"}}},
        {"plan-0": {"action": "accept", "content": {"action": "edit", "terms": 12}}},
        {"plan-0": {"action": "accept", "content": {"action": "edit", "year_from": "2016"}}},
        {"plan-0": {"action": "accept", "content": {"action": "edit", "terms": "a\x00b"}}},
        {"plan-0": {"action": "accept", "content": {"action": "edit", "terms": "x" * 100_000}}},
        {"plan-0": {"action": "accept", "content": {"action": "edit", "sources": ["ftp"]}}},
        {"plan-0": {"action": "accept", "content": {"action": "approve", "note": "n" * 100_000}}},
    ],
)
def test_an_answer_that_is_not_a_decision_is_refused_and_loses_nothing(owner, responses):
    job = _started(owner)
    with pytest.raises(InvalidInput):
        literature_task_update(identity=identity_of(owner), task_id=str(job.pk), input_responses=responses)
    job = _job(job)
    assert job.state == JobState.WAITING
    assert job.checkpoint_kind == "plan"
    assert not JobDecision.objects.filter(job=job).exists()
    # And the right answer still works.
    assert _update(owner, job, _accept("plan-0", action="approve")).checkpoint_kind == "screening"


def test_an_answer_to_a_decided_checkpoint_is_refused(owner):
    job = _started(owner)
    job = _update(owner, job, _accept("plan-0", action="approve"))
    with pytest.raises(InvalidInput):
        _update(owner, job, _accept("plan-0", action="reject"))
    assert _job(job).checkpoint_kind == "screening"


def test_another_persons_or_tenants_task_is_not_found(owner, member, outsider):
    job = _started(owner)
    for stranger in (member, outsider):
        identity = identity_of(stranger)
        with pytest.raises(NotFound):
            literature_task_update(identity=identity, task_id=str(job.pk), input_responses={})
        with pytest.raises(NotFound):
            literature_task_cancel(identity=identity, task_id=str(job.pk))
    assert _job(job).state == JobState.WAITING


def test_the_runners_do_not_know_each_others_tasks(owner):
    job = _started(owner)
    identity = identity_of(owner)
    with pytest.raises(NotFound):
        tool_task_get(identity=identity, task_id=str(job.pk))
    generic = tool_task_start(
        identity=identity, tool="decide", arguments={}, client_capabilities={}, ttl_ms=None
    )
    with pytest.raises(NotFound):
        literature_task_update(identity=identity, task_id=generic.task_id, input_responses={})
    for hostile in ("not-a-uuid", "\x00", "9" * 5000):
        with pytest.raises(NotFound):
            literature_task_cancel(identity=identity, task_id=hostile)


def test_a_viewers_token_cannot_decide_or_cancel(owner):
    job = _started(owner)
    viewer = identity_of(owner, scopes=frozenset({SCOPE_READ}))
    with pytest.raises(InsufficientScope):
        literature_task_update(
            identity=viewer, task_id=str(job.pk), input_responses=_accept("plan-0", action="approve")
        )
    with pytest.raises(InsufficientScope):
        literature_task_cancel(identity=viewer, task_id=str(job.pk))
    assert _job(job).state == JobState.WAITING


def test_cancel_cancels_the_job_and_is_idempotent(owner):
    job = _started(owner)
    literature_task_cancel(identity=identity_of(owner), task_id=str(job.pk))
    literature_task_cancel(identity=identity_of(owner), task_id=str(job.pk))
    assert literature_tool_task(job=_job(job)).status == "cancelled"


def test_a_rejected_plan_is_cancelled_and_a_failed_job_failed(owner):
    job = _update(owner, _started(owner), _accept("plan-0", action="reject"))
    task = literature_tool_task(job=job)
    assert task.status == "cancelled"
    assert "rejected" in task.status_message
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED, error="Every source failed.")
    task = literature_tool_task(job=_job(job))
    assert task.status == "failed"
    assert task.error == {"code": -32603, "message": "Every source failed."}


def test_with_the_research_toolset_off_its_tasks_are_nobodys(owner):
    job = _started(owner)
    identity = identity_of(owner)
    assert literature_task_get(identity=identity, task_id=str(job.pk)).status == "input_required"
    toolset_set_enabled(tenant=owner.tenant, toolset="research", enabled=False, registry=default_registry())
    with pytest.raises(NotFound):
        literature_task_get(identity=identity, task_id=str(job.pk))
    with pytest.raises(NotFound):
        literature_task_update(
            identity=identity, task_id=str(job.pk), input_responses=_accept("plan-0", action="approve")
        )
    with pytest.raises(NotFound):
        literature_task_cancel(identity=identity, task_id=str(job.pk))
    assert _job(job).state == JobState.WAITING

"""The research tools' refusals, one by one: each a tool result with ``isError`` and the structured
error (``research.tool_answers``), never an exception or a crash."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from mcp.server.mcpserver.exceptions import ToolError

from jobs.errors import JOB_NOT_FOUND
from jobs.models import Job, JobDecision, JobState
from research import services
from tests.research.tool_support import StepsPump, library_fill, tool_call
from tests.support.workflow_support import identity_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(owner):
    library_fill(tenant=owner.tenant)
    return identity_for(owner)


async def _at_plan(identity):
    with StepsPump():
        call = await tool_call(identity, "search_papers", query="learning")
    assert call.structured["checkpoint"]["kind"] == "plan", call.structured
    return call.structured["session_id"]


def _error(call):
    assert call.is_error, call.result
    error = call.structured["error"]
    assert error["message"] in call.result.content[0].text
    return error


async def test_an_unknown_session_is_refused_as_unknown(alice):
    missing = str(uuid.uuid4())
    for name, extra in (
        ("get_session", {}),
        ("decide", {"action": "approve"}),
        ("cancel_session", {}),
        ("export_results", {}),
    ):
        error = _error(await tool_call(alice, name, session_id=missing, **extra))
        assert error == {
            "code": -32002,
            "reason": "unknown_session",
            "message": JOB_NOT_FOUND.format(job_id=missing),
        }


async def test_a_malformed_session_id_reads_like_an_unknown_one(alice):
    for session_id in ("not-a-uuid", "", "\x00", "1" * 100):
        error = _error(await tool_call(alice, "get_session", session_id=session_id))
        assert (error["code"], error["reason"]) == (-32002, "unknown_session")


@pytest.fixture
def others(member, outsider):
    """A colleague in alice's tenant and an admin of another tenant."""
    return [identity_for(member), identity_for(outsider)]


async def test_another_persons_and_another_tenants_session_read_like_a_missing_one(alice, others):
    session_id = await _at_plan(alice)
    for other in others:
        for name, extra in (("get_session", {}), ("decide", {"action": "approve"}), ("cancel_session", {})):
            error = _error(await tool_call(other, name, session_id=session_id, **extra))
            assert error == {
                "code": -32002,
                "reason": "unknown_session",
                "message": JOB_NOT_FOUND.format(job_id=session_id),
            }
    job = await Job.objects.aget(pk=session_id)
    assert (job.state, job.checkpoint_kind) == (JobState.WAITING, "plan")


async def test_a_decision_while_the_job_runs_finds_no_pending_checkpoint(alice, monkeypatch):
    monkeypatch.setattr(services, "WAIT_SECONDS", 0.0)
    call = await tool_call(alice, "search_papers", query="learning")
    assert call.structured["status"] == "running"
    session_id = call.structured["session_id"]
    error = _error(await tool_call(alice, "decide", session_id=session_id, action="approve"))
    assert (error["code"], error["reason"]) == (-32602, "no_pending_checkpoint")


async def test_the_same_decision_on_a_complete_job_is_answered_again_and_another_is_refused(alice):
    session_id = await _at_plan(alice)
    with StepsPump():
        for _ in range(3):
            call = await tool_call(alice, "decide", session_id=session_id, action="approve")
    assert call.structured["result"]["paper_count"] == 4
    # The same approval again is answered as the first was, and nothing more is stored.
    again = await tool_call(alice, "decide", session_id=session_id, action="approve")
    assert again.structured["result"] == call.structured["result"]
    assert again.structured["message"].startswith(
        "Your identical decision at checkpoint 'final-2' was already"
    )
    named = await tool_call(alice, "decide", session_id=session_id, action="approve", checkpoint="final-2")
    assert named.structured["result"] == call.structured["result"]
    assert await JobDecision.objects.filter(job_id=session_id).acount() == 3
    error = _error(await tool_call(alice, "decide", session_id=session_id, action="edit", data={"keep": []}))
    assert (error["code"], error["reason"]) == (-32602, "already_complete")
    error = _error(await tool_call(alice, "cancel_session", session_id=session_id))
    assert error["reason"] == "already_complete"


async def test_an_invalid_action_is_refused(alice):
    session_id = await _at_plan(alice)
    for action in ("approve ", "APPROVE", "delete", "", "\x00"):
        error = _error(await tool_call(alice, "decide", session_id=session_id, action=action))
        assert (error["code"], error["reason"]) == (-32602, "invalid_action")
    get = await tool_call(alice, "get_session", session_id=session_id)
    assert (get.structured["current_checkpoint_kind"], get.structured["iteration"]) == ("plan", 0)


async def test_invalid_data_is_refused_and_the_checkpoint_still_waits(alice):
    session_id = await _at_plan(alice)
    for action, data in (
        ("edit", {"terms": []}),
        ("edit", {"colour": "blue"}),
        ("edit", {"year_from": 2020, "year_to": 2010}),
        ("edit", {"sources": ["nowhere"]}),
        ("approve", {"terms": ["x"]}),
        ("edit", {"terms": ["nul\x00byte"]}),
    ):
        error = _error(await tool_call(alice, "decide", session_id=session_id, action=action, data=data))
        assert (error["code"], error["reason"]) == (-32602, "invalid_data"), data
    get = await tool_call(alice, "get_session", session_id=session_id)
    assert get.structured["has_pending_checkpoint"] is True
    assert await Job.objects.filter(pk=session_id, decisions__isnull=False).acount() == 0


async def test_an_invalid_query_is_refused_as_invalid_data(alice):
    for query in ("", "   ", "nul\x00byte", "bell\x07"):
        error = _error(await tool_call(alice, "search_papers", query=query))
        assert (error["code"], error["reason"]) == (-32602, "invalid_data")
    assert await Job.objects.acount() == 0


async def test_arguments_the_schema_refuses_never_reach_the_tool(alice):
    with pytest.raises(ToolError):
        await tool_call(alice, "search_papers", query="x" * 501)
    with pytest.raises(ToolError):
        await tool_call(alice, "search_papers", query="learning", max_results=0)
    with pytest.raises(ToolError):
        await tool_call(alice, "export_results", session_id=str(uuid.uuid4()), format="pdf")
    assert await Job.objects.acount() == 0


async def test_exporting_an_incomplete_job_is_refused(alice):
    session_id = await _at_plan(alice)
    error = _error(await tool_call(alice, "export_results", session_id=session_id, format="json"))
    assert (error["code"], error["reason"]) == (-32602, "not_complete")


async def test_a_failed_workflow_answers_its_error(alice):
    session_id = await _at_plan(alice)

    def fail() -> None:
        job = Job.objects.get(pk=session_id)
        # The plan names a source this deployment no longer has: the search step fails.
        job.context = {**job.context, "plan": {**job.context["plan"], "sources": ["gone"]}}
        job.save()

    await sync_to_async(fail)()
    with StepsPump():
        call = await tool_call(alice, "decide", session_id=session_id, action="approve")
    error = _error(call)
    assert (error["code"], error["reason"]) == (-32602, "workflow_failed")
    job = await Job.objects.aget(pk=session_id)
    assert job.state == JobState.FAILED
    assert job.error
    assert job.error in error["message"]
    get = await tool_call(alice, "get_session", session_id=session_id)
    assert get.structured["error"] == job.error
    again = _error(await tool_call(alice, "decide", session_id=session_id, action="approve"))
    assert again["reason"] == "workflow_failed"
    export = _error(await tool_call(alice, "export_results", session_id=session_id))
    assert export["reason"] == "workflow_failed"


async def test_a_cancelled_job_refuses_decisions_and_a_second_cancel(alice):
    session_id = await _at_plan(alice)
    call = await tool_call(alice, "cancel_session", session_id=session_id)
    assert call.structured["status"] == "cancelled"
    for name, extra in (("decide", {"action": "approve"}), ("cancel_session", {})):
        error = _error(await tool_call(alice, name, session_id=session_id, **extra))
        assert (error["code"], error["reason"]) == (-32602, "cancelled")

"""The paper-search specification's properties, as hypothesis tests against the real tools: called
through the SDK server in this process (``tool_support.tool_call``), on the real database, with the
job steps run by the worker's own loop in a thread (``StepsPump``).

- lifecycle: get_session right after search_papers is valid and agrees with it;
- every action at every checkpoint kind, with valid or hostile data, gives a valid answer (a new
  checkpoint, a result, a stop, or a clean ``isError`` that leaves the checkpoint as it was);
- two jobs never share state;
- progress only rises;
- a cancelled job is gone from everything that runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jobs.models import Job, JobState
from research import services, tools
from research.literature_job import literature_search
from tests.jobs.support import steps_run
from tests.research.tool_support import Call, StepsPump, library_fill, tool_call
from tests.support.workflow_support import identity_for

pytestmark = pytest.mark.django_db(transaction=True)

PROPERTY_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
WORDS = ("learning", "attention", "deep", "transformers", "vision", "residual", "language")
ACTIONS = ("approve", "edit", "reject")
# What a refusal at a waiting checkpoint may say: the data or the action was wrong, nothing else.
CHECKPOINT_REFUSALS = {"invalid_data", "invalid_action"}

queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=3),
)
plan_data = st.fixed_dictionaries(
    {},
    optional={
        "terms": st.one_of(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), junk),
        "year_from": st.one_of(st.integers(min_value=1500, max_value=2030), junk),
        "year_to": st.one_of(st.integers(min_value=1500, max_value=2030), junk),
        "sources": st.one_of(st.just(["library"]), st.just(["nowhere"]), junk),
        "max_results": st.one_of(st.integers(min_value=-1, max_value=600), junk),
    },
)
dois = st.lists(
    st.one_of(st.sampled_from(["10.5555/attention", "10.9999/unknown.1", "10.1109/CVPR.2016.90"]), junk),
    max_size=3,
)
garbage = st.dictionaries(st.text(max_size=8), junk, max_size=3)


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    # A waiting call reads the job's row this often; the steps here finish in milliseconds.
    monkeypatch.setattr(tools, "POLL_SECONDS", 0.02)


@pytest.fixture
def alice(owner):
    library_fill(tenant=owner.tenant)
    return identity_for(owner)


def _ids(checkpoint: dict[str, Any]) -> list[str]:
    return [paper["id"] for paper in checkpoint.get("candidates", checkpoint.get("papers", []))]


def _data_for(draw: Any, kind: str, action: str, checkpoint: dict[str, Any]) -> dict[str, Any] | None:
    """Data for ``action`` at a ``kind`` checkpoint: often what the kind takes, sometimes not."""
    if draw(st.booleans()):
        return draw(st.one_of(st.none(), garbage))
    ids = _ids(checkpoint)
    keep = st.lists(st.one_of(st.sampled_from(ids or ["p1"]), st.text(max_size=4)), max_size=4)
    if kind == "plan" or (kind == "screening" and action == "reject"):
        return draw(plan_data) if action != "approve" else None
    if kind == "screening" and action == "edit":
        return draw(st.fixed_dictionaries({}, optional={"keep": keep, "add_dois": dois}))
    if kind == "final" and action == "edit":
        return {"keep": draw(keep)}
    return None


def _kind_of(call: Call) -> str | None:
    checkpoint = call.structured.get("checkpoint")
    return checkpoint["kind"] if checkpoint else None


def _assert_valid_next_state(call: Call) -> None:
    shown = {"checkpoint", "result", "status"} & set(call.structured)
    assert len(shown) == 1, call.structured
    if "checkpoint" in shown:
        assert call.structured["checkpoint"]["kind"] in literature_search.checkpoint_kinds
    if "status" in shown:
        assert call.structured["status"] in (JobState.RUNNING, JobState.CANCELLED)


def _progress_rises(calls: list[Call]) -> None:
    seen = [value for call in calls for value, _ in call.progress]
    assert seen == sorted(seen), seen
    for call in calls:
        values = [value for value, _ in call.progress]
        assert len(values) == len(set(values)), values


@PROPERTY_SETTINGS
@given(query=queries, max_results=st.integers(min_value=1, max_value=10))
def test_get_session_right_after_search_papers_agrees_with_it(alice, query, max_results):
    async def run() -> None:
        with StepsPump():
            started = await tool_call(alice, "search_papers", query=query, max_results=max_results)
        _assert_valid_next_state(started)
        session_id = started.structured["session_id"]
        got = await tool_call(alice, "get_session", session_id=session_id)
        state = got.structured
        assert state["session_id"] == session_id
        assert state["query"] == query
        assert state["iteration"] == started.structured["iteration"] == 0
        assert state["is_complete"] is False
        assert state["has_pending_checkpoint"] is (_kind_of(started) is not None)
        assert state["current_checkpoint_kind"] == _kind_of(started)
        assert state["error"] is None

    asyncio.run(run())


@PROPERTY_SETTINGS
@given(query=queries, data=st.data())
def test_every_action_at_every_checkpoint_gives_a_valid_answer(alice, query, data):
    async def run() -> None:
        with StepsPump():
            call = await tool_call(alice, "search_papers", query=query)
            calls = [call]
            session_id = call.structured["session_id"]
            for _ in range(8):
                kind = _kind_of(call)
                if kind is None:
                    break
                checkpoint = call.structured["checkpoint"]
                action = data.draw(st.one_of(st.sampled_from(ACTIONS), st.text(max_size=8)), label="action")
                decision = _data_for(data.draw, kind, action, checkpoint)
                before = await tool_call(alice, "get_session", session_id=session_id)
                answer = await tool_call(alice, "decide", session_id=session_id, action=action, data=decision)
                after = await tool_call(alice, "get_session", session_id=session_id)
                named = action if action in ACTIONS else "other"
                event(f"{kind} {named}: {'refused' if answer.is_error else 'ok'}")
                if answer.is_error:
                    assert answer.structured["error"]["reason"] in CHECKPOINT_REFUSALS, answer.structured
                    assert answer.structured["error"]["code"] == -32602
                    assert after.structured == before.structured
                    continue
                _assert_valid_next_state(answer)
                calls.append(answer)
                if "checkpoint" in answer.structured:
                    assert answer.structured["iteration"] == before.structured["iteration"] + 1
                    assert after.structured["current_checkpoint_kind"] == _kind_of(answer)
                elif "result" in answer.structured:
                    assert after.structured["is_complete"] is True
                    assert answer.structured["result"]["paper_count"] >= 0
                elif answer.structured["status"] == JobState.CANCELLED:
                    assert (kind, action) == ("plan", "reject")
                call = answer
            _progress_rises(calls)

    asyncio.run(run())


@PROPERTY_SETTINGS
@given(
    queries_pair=st.tuples(queries, queries),
    moves=st.lists(st.tuples(st.integers(min_value=0, max_value=1), st.sampled_from(ACTIONS)), max_size=6),
)
def test_two_jobs_never_share_state(alice, queries_pair, moves):
    async def run() -> None:
        with StepsPump():
            first = await tool_call(alice, "search_papers", query=queries_pair[0])
            second = await tool_call(alice, "search_papers", query=queries_pair[1])
            ids = [first.structured["session_id"], second.structured["session_id"]]
            assert ids[0] != ids[1]
            for which, action in moves:
                other = ids[1 - which]
                other_before = await tool_call(alice, "get_session", session_id=other)
                await tool_call(alice, "decide", session_id=ids[which], action=action)
                other_after = await tool_call(alice, "get_session", session_id=other)
                assert other_after.structured == other_before.structured
            for session_id, query in zip(ids, queries_pair, strict=True):
                state = (await tool_call(alice, "get_session", session_id=session_id)).structured
                assert state["query"] == query
                job = await Job.objects.aget(pk=session_id)
                decided = [d async for d in job.decisions.values_list("job_id", flat=True)]
                assert set(decided) <= {job.pk}

    asyncio.run(run())


@PROPERTY_SETTINGS
@given(query=queries, approvals=st.integers(min_value=0, max_value=3))
def test_progress_only_rises(alice, query, approvals):
    async def run() -> None:
        with StepsPump():
            call = await tool_call(alice, "search_papers", query=query)
            calls = [call]
            session_id = call.structured["session_id"]
            for _ in range(approvals):
                if _kind_of(call) is None:
                    break
                call = await tool_call(alice, "decide", session_id=session_id, action="approve")
                calls.append(call)
        _progress_rises(calls)
        state = (await tool_call(alice, "get_session", session_id=session_id)).structured
        reported = [value for c in calls for value, _ in c.progress]
        assert not reported or state["progress"] >= reported[-1]

    asyncio.run(run())


@PROPERTY_SETTINGS
@given(query=queries, approvals=st.integers(min_value=-1, max_value=2))
def test_a_cancelled_job_is_gone_from_everything_that_runs(alice, query, approvals, monkeypatch):
    """``approvals`` -1 cancels while the first step is still queued; 0, 1, 2 at the plan, the
    screening and the final checkpoint."""
    ran: list[str] = []
    run_step = literature_search.run_step

    def recording(*, job: Any, step: str, report: Any) -> Any:
        ran.append(job.id)
        return run_step(job=job, step=step, report=report)

    monkeypatch.setattr(literature_search, "run_step", recording)

    async def run() -> None:
        if approvals < 0:
            monkeypatch.setattr(services, "WAIT_SECONDS", 0.0)
            call = await tool_call(alice, "search_papers", query=query)
            monkeypatch.setattr(services, "WAIT_SECONDS", 25.0)
            assert call.structured["status"] == JobState.RUNNING
        else:
            with StepsPump():
                call = await tool_call(alice, "search_papers", query=query)
                for _ in range(approvals):
                    call = await tool_call(
                        alice, "decide", session_id=call.structured["session_id"], action="approve"
                    )
        session_id = call.structured["session_id"]
        cancelled = await tool_call(alice, "cancel_session", session_id=session_id)
        assert cancelled.structured["status"] == JobState.CANCELLED
        progress = cancelled.structured["progress"]
        ran.clear()
        await asyncio.to_thread(_steps_run_and_close)
        assert session_id not in ran
        state = (await tool_call(alice, "get_session", session_id=session_id)).structured
        assert state["status"] == JobState.CANCELLED
        assert state["progress"] == progress
        assert (state["has_pending_checkpoint"], state["is_complete"]) == (False, False)
        for name, extra in (("decide", {"action": "approve"}), ("cancel_session", {})):
            refused = await tool_call(alice, name, session_id=session_id, **extra)
            assert refused.is_error
            assert refused.structured["error"]["reason"] == "cancelled"

    asyncio.run(run())


def _steps_run_and_close() -> None:
    from django.db import connection

    try:
        steps_run()
    finally:
        connection.close()

"""A decision applies once, to the checkpoint its person saw (``jobs.checkpoints``).

The findings this guards against: eight ``decide(approve)`` sent at once stored plan, screening and
final approvals; "Approve all" posted four times stored the second as a final approval; a retry after
the worker answering it was killed approved the next checkpoint. Below: the same calls through the
real tools, and hypothesis over interleavings of showing, deciding (named, stale or unnamed, arriving
before or after a showing), cancelling and the worker's steps.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import InvalidInput
from jobs.checkpoints import checkpoint_name, checkpoint_pending, checkpoint_shown
from jobs.models import Job, JobDecision, JobState
from research import services
from research.models import LibraryPaper
from tests.jobs.support import steps_run
from tests.research.tool_support import StepsPump, library_fill, tool_call
from tests.support.workflow_support import identity_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(owner):
    library_fill(tenant=owner.tenant)
    return identity_for(owner)


def _decisions(session_id: str) -> list[tuple[str, str]]:
    return [
        (checkpoint_name(kind=d.checkpoint_kind, iteration=d.iteration), d.action)
        for d in JobDecision.objects.filter(job_id=session_id).order_by("created", "id")
    ]


async def _at_plan(identity) -> str:
    with StepsPump():
        call = await tool_call(identity, "search_papers", query="learning")
    assert call.structured["checkpoint"]["id"] == "plan-0", call.structured
    return call.structured["session_id"]


async def test_eight_approvals_sent_at_once_approve_the_plan_once(alice):
    session_id = await _at_plan(alice)
    with StepsPump():
        calls = await asyncio.gather(
            *(tool_call(alice, "decide", session_id=session_id, action="approve") for _ in range(8))
        )
    assert [call.is_error for call in calls] == [False] * 8
    assert await sync_to_async(_decisions)(session_id) == [("plan-0", "approve")]
    job = await Job.objects.aget(pk=session_id)
    # The screening was shown (in the answers) but nobody decided it.
    assert (job.state, job.checkpoint_kind) == (JobState.WAITING, "screening")


async def test_a_retry_after_the_answer_was_lost_does_not_approve_the_next_checkpoint(alice):
    session_id = await _at_plan(alice)
    # The first call stored its decision; the worker answering it died before it answered.
    await sync_to_async(services.search_decide)(
        tenant_id=alice.tenant_id, user_id=alice.user_id, session_id=session_id, action="approve"
    )
    await sync_to_async(steps_run)()
    retry = await tool_call(alice, "decide", session_id=session_id, action="approve")
    assert retry.structured["checkpoint"]["id"] == "screening-1"
    assert retry.structured["message"] == (
        "Your identical decision at checkpoint 'plan-0' was already stored; this call stored nothing. "
        "To decide checkpoint 'screening-1', call decide with checkpoint 'screening-1'."
    )
    assert await sync_to_async(_decisions)(session_id) == [("plan-0", "approve")]
    # Having been shown the screening, the person approves it: now without naming it too.
    with StepsPump():
        approved = await tool_call(alice, "decide", session_id=session_id, action="approve")
    assert approved.structured["checkpoint"]["id"] == "final-2"
    assert await sync_to_async(_decisions)(session_id) == [("plan-0", "approve"), ("screening-1", "approve")]


async def test_a_named_checkpoint_is_enforced_and_a_passed_one_is_refused_naming_the_current(alice):
    session_id = await _at_plan(alice)
    with StepsPump():
        await tool_call(alice, "decide", session_id=session_id, action="approve", checkpoint="plan-0")
    stale = await tool_call(alice, "decide", session_id=session_id, action="reject", checkpoint="plan-0")
    assert stale.is_error
    assert stale.structured["error"]["reason"] == "checkpoint_decided"
    assert stale.structured["error"]["message"] == (
        "Checkpoint 'plan-0' was already decided (approve); the job now waits at checkpoint 'screening-1'."
    )
    ahead = await tool_call(alice, "decide", session_id=session_id, action="approve", checkpoint="final-2")
    assert ahead.structured["error"]["reason"] == "checkpoint_not_pending"
    for hostile in (
        "plan",
        "plan-0\u202e",
        "plan-\u0660",
        "plan-0\n",
        "PLAN-0",
        "plan--1",
        "plan-0\x00",
        "\u200bplan-0",
    ):
        refused = await tool_call(
            alice, "decide", session_id=session_id, action="approve", checkpoint=hostile
        )
        assert refused.is_error, hostile
        assert refused.structured["error"]["reason"] == "invalid_checkpoint", hostile
    assert await sync_to_async(_decisions)(session_id) == [("plan-0", "approve")]


async def test_get_session_shows_the_pending_checkpoint_by_name_and_in_full(alice):
    session_id = await _at_plan(alice)
    state = (await tool_call(alice, "get_session", session_id=session_id)).structured
    assert state["current_checkpoint"] == "plan-0"
    assert state["checkpoint"]["id"] == "plan-0"
    assert state["checkpoint"]["kind"] == "plan"
    assert state["checkpoint"]["terms"]


def test_a_checkpoint_never_shown_is_not_decided_by_a_decision_that_names_none(owner):
    library_fill(tenant=owner.tenant)
    job = services.search_start(tenant_id=owner.tenant_id, user_id=owner.user_id, query="learning")
    steps_run()
    with pytest.raises(InvalidInput) as refused:
        services.search_decide(
            tenant_id=owner.tenant_id, user_id=owner.user_id, session_id=job.pk, action="approve"
        )
    assert refused.value.data == {"reason": "checkpoint_not_shown"}
    assert "call get_session to see it" in refused.value.message
    assert not JobDecision.objects.exists()


def test_decision_data_too_deep_to_store_is_refused_cleanly(owner):
    library_fill(tenant=owner.tenant)
    job = services.search_start(tenant_id=owner.tenant_id, user_id=owner.user_id, query="learning")
    steps_run()
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(InvalidInput):
        services.search_decide(
            tenant_id=owner.tenant_id,
            user_id=owner.user_id,
            session_id=job.pk,
            action="edit",
            data=deep,
            checkpoint="plan-0",
        )
    assert not JobDecision.objects.exists()


# Interleavings. A logical clock orders what happened: each showing and each decision's arrival is
# a tick; a decision may have arrived some ticks before it is processed (it waited for a thread, or
# for the job's lock), as concurrent calls do.


@dataclass
class _World:
    job_id: str
    tenant_id: int
    user_id: int
    clock: itertools.count = field(default_factory=lambda: itertools.count(1))
    shown: dict[str, int] = field(default_factory=dict)  # name -> tick of its first showing
    now: int = 0

    def tick(self) -> int:
        self.now = next(self.clock)
        return self.now

    def job(self) -> Job:
        return Job.objects.get(pk=self.job_id)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("step")),
        st.tuples(st.just("show")),
        st.tuples(st.just("cancel")),
        st.tuples(
            st.just("decide"),
            st.sampled_from(["approve", "approve", "approve", "reject"]),
            st.sampled_from(["named", "stale", "unnamed"]),
            st.integers(min_value=0, max_value=4),  # ticks it arrived before being processed
        ),
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(moves=operations)
def test_at_most_one_decision_per_checkpoint_and_never_one_unseen(owner, moves):
    if not LibraryPaper.objects.filter(tenant=owner.tenant).exists():
        library_fill(tenant=owner.tenant)
    job = services.search_start(tenant_id=owner.tenant_id, user_id=owner.user_id, query="learning")
    world = _World(job_id=str(job.pk), tenant_id=owner.tenant_id, user_id=owner.user_id)
    for move in moves:
        _play(world, move)
        stored = _decisions(world.job_id)
        names = [name for name, _ in stored]
        assert len(names) == len(set(names)), stored
    steps_run()  # what the moves left enqueued, so no other example inherits it


def _play(world: _World, move: tuple[Any, ...]) -> None:
    if move[0] == "step":
        steps_run()
        return
    if move[0] == "show":
        job = world.job()
        name = checkpoint_pending(job)
        at = world.tick()
        checkpoint_shown(job=job, at=at)
        if name is not None:
            world.shown.setdefault(name, at)
        return
    if move[0] == "cancel":
        refused = _refusal(
            lambda: services.search_cancel(
                tenant_id=world.tenant_id, user_id=world.user_id, session_id=world.job_id
            )
        )
        assert refused in {None, "already_complete", "cancelled", "workflow_failed"}
        return
    _, action, mode, waited = move
    arrived = world.tick() - waited - 0.5  # strictly between two ticks: it came in then
    seen = [name for name, at in world.shown.items() if at <= arrived]
    named = None
    if mode == "named" and seen:
        named = seen[-1]
    elif mode == "stale" and len(seen) > 1:
        named = seen[-2]
    before = _decisions(world.job_id)
    refused = _refusal(
        lambda: services.search_decide(
            tenant_id=world.tenant_id,
            user_id=world.user_id,
            session_id=world.job_id,
            action=action,
            checkpoint=named,
            arrived=arrived,
        )
    )
    assert refused in {
        None,
        "no_pending_checkpoint",
        "checkpoint_not_shown",
        "checkpoint_not_pending",
        "checkpoint_decided",
        "already_complete",
        "cancelled",
        "invalid_data",
    }
    after = _decisions(world.job_id)
    added = after[len(before) :]
    assert len(added) <= 1
    if added:
        [(name, _)] = added
        # What it decided, its person had been shown before the decision came in.
        assert name in seen, (name, seen, move)
        if named is not None:
            assert name == named


def _refusal(call: Callable[[], object]) -> str | None:
    """The reason of the refusal ``call`` raised, or None when it went through."""
    try:
        call()
    except InvalidInput as refusal:
        return str((refusal.data or {}).get("reason"))
    return None

"""Starting, deciding and cancelling jobs: each one transaction that changes the job's row and,
when work follows, enqueues the next step in that same transaction (the task queue's rows live in
the same database), so a crash either loses both or neither.

Every function takes the caller's tenant and person; another person's job is ``JobNotFound``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from jobs import errors
from jobs.kinds import (
    Complete,
    DecisionOutcome,
    Stop,
    job_kind_get,
)
from jobs.models import (
    NOTE_MAX_CHARS,
    ORIGIN_MAX_CHARS,
    PROGRESS_MESSAGE_MAX_CHARS,
    DecisionAction,
    Job,
    JobDecision,
    JobState,
)
from jobs.selectors import job_get
from jobs.steps import job_finish, job_view, outcome_store, step_enqueue

ACTIONS = tuple(DecisionAction.values)


def job_start(
    *,
    tenant_id: int,
    user_id: int,
    kind: str,
    job_input: Mapping[str, Any],
    origin: str = "",
    client_id: str = "",
) -> Job:
    """A new job of ``kind``, its first step enqueued."""
    job_kind = job_kind_get(kind)
    stored_input = job_kind.validate_input(job_input=job_input)
    first = job_kind.first_step(job_input=stored_input)
    with transaction.atomic():
        job = Job.objects.create(
            tenant_id=tenant_id,
            user_id=user_id,
            kind=kind,
            input=stored_input,
            origin=origin[:ORIGIN_MAX_CHARS],
            client_id=client_id[:ORIGIN_MAX_CHARS],
            context=first.context,
            progress_message=first.message[:PROGRESS_MESSAGE_MAX_CHARS],
        )
        step_enqueue(job=job, step=first.step)
    return job


def job_decide(
    *,
    tenant_id: int,
    user_id: int,
    job_id: object,
    action: object,
    data: Mapping[str, Any] | None = None,
    note: str | None = None,
    channel: str = "mcp",
) -> Job:
    """Apply the person's decision at the job's pending checkpoint; returns the job as it stands."""
    if not isinstance(action, str) or action not in ACTIONS:
        raise errors.invalid_action(action=str(action), allowed=ACTIONS)
    if data is not None and not isinstance(data, Mapping):
        raise InvalidInput("data must be an object.")
    note_text = _note_checked(note)
    with transaction.atomic():
        job = job_get(tenant_id=tenant_id, user_id=user_id, job_id=job_id, for_update=True)
        if job.is_finished:
            raise errors.already_finished(state=job.state, error=job.error)
        if job.state != JobState.WAITING:
            raise errors.no_pending_checkpoint(state=job.get_state_display().lower())
        outcome = job_kind_get(job.kind).decide(job=job_view(job), action=action, data=data)
        JobDecision.objects.create(
            job=job,
            user_id=user_id,
            iteration=job.iteration,
            checkpoint_kind=job.checkpoint_kind,
            action=action,
            data=dict(data) if data is not None else None,
            note=note_text,
            channel=channel,
        )
        _apply_decision(job=job, outcome=outcome)
    return job


def job_cancel(*, tenant_id: int, user_id: int, job_id: object) -> Job:
    """Cancel a running or waiting job: its step's task, if any, finds its token gone and does
    nothing, and no decision is accepted again."""
    with transaction.atomic():
        job = job_get(tenant_id=tenant_id, user_id=user_id, job_id=job_id, for_update=True)
        if job.is_finished:
            raise errors.already_finished(state=job.state, error=job.error)
        job_finish(job=job, state=JobState.CANCELLED, message="Cancelled.")
        job.save()
    return job


def _apply_decision(*, job: Job, outcome: DecisionOutcome) -> None:
    if isinstance(outcome, Stop):
        job_finish(job=job, state=JobState.CANCELLED, message=outcome.reason)
        job.save()
        return
    if not isinstance(outcome, Complete):
        job.iteration += 1
    outcome_store(job=job, outcome=outcome)


def _note_checked(note: object) -> str:
    if note is None:
        return ""
    if not isinstance(note, str):
        raise InvalidInput("note must be a string.")
    if len(note) > NOTE_MAX_CHARS:
        raise InvalidInput(f"note is longer than {NOTE_MAX_CHARS} characters.")
    reason = text_unstorable_reason(note)
    if reason:
        raise InvalidInput(f"note {reason}.")
    return note

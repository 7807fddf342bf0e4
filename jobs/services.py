"""Starting, deciding and cancelling jobs: each one transaction that changes the job's row and,
when work follows, enqueues the next step in that same transaction (the task queue's rows live in
the same database), so a crash either loses both or neither.

Every function takes the caller's tenant and person; another person's job is ``JobNotFound``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from jobs import errors
from jobs.kinds import (
    Checkpoint,
    Complete,
    DecisionOutcome,
    JobView,
    NextStep,
    Stop,
    job_kind_get,
    job_kind_queue,
)
from jobs.models import (
    ERROR_MAX_CHARS,
    NOTE_MAX_CHARS,
    ORIGIN_MAX_CHARS,
    PROGRESS_MESSAGE_MAX_CHARS,
    DecisionAction,
    Job,
    JobDecision,
    JobState,
)
from jobs.selectors import job_get

ACTIONS = tuple(DecisionAction.values)


def job_view(job: Job) -> JobView:
    return JobView(
        id=str(job.id),
        tenant_id=job.tenant_id,
        user_id=job.user_id,
        kind=job.kind,
        input=job.input,
        context=job.context,
        iteration=job.iteration,
        checkpoint_kind=job.checkpoint_kind,
        checkpoint=job.checkpoint,
    )


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


def step_enqueue(*, job: Job, step: str, attempts: int = 0) -> None:
    """Make ``step`` the job's next step under a new token and enqueue its task; saves the job.

    Call inside a transaction: the task row and the job row commit together. ``attempts`` carries
    the claims a recovered step already had (``jobs.recovery``); a new step starts at 0.
    """
    from jobs.steps import job_step_run

    token = uuid.uuid4()
    job.state = JobState.RUNNING
    job.step = step
    job.step_token = token
    job.step_worker = ""
    job.step_heartbeat = None
    job.step_attempts = attempts
    job.checkpoint_kind = ""
    job.checkpoint = None
    queue = job_kind_queue(job_kind_get(job.kind))
    result = job_step_run.using(queue_name=queue).enqueue(job_id=str(job.id), token=str(token))
    job.step_task_id = str(result.id)[:64]
    job.save()


def _apply_decision(*, job: Job, outcome: DecisionOutcome) -> None:
    if isinstance(outcome, Stop):
        job_finish(job=job, state=JobState.CANCELLED, message=outcome.reason)
        job.save()
        return
    if not isinstance(outcome, Complete):
        job.iteration += 1
    outcome_store(job=job, outcome=outcome)


def outcome_store(*, job: Job, outcome: NextStep | Checkpoint | Complete) -> str:
    """Apply what a step or a decision leads to and save the job (enqueuing the next step, if
    any, in the caller's transaction); returns what happened, for the task's result row."""
    if outcome.message:
        job.progress_message = outcome.message[:PROGRESS_MESSAGE_MAX_CHARS]
    if isinstance(outcome, NextStep):
        job.context = outcome.context
        step_enqueue(job=job, step=outcome.step)
        return f"next {outcome.step}"
    if isinstance(outcome, Checkpoint):
        job.state = JobState.WAITING
        job.checkpoint_kind = outcome.kind
        job.checkpoint = outcome.payload
        job.context = outcome.context
        _step_clear(job)
        job.save()
        return f"checkpoint {outcome.kind}"
    job.result = outcome.result
    if outcome.context:
        job.context = outcome.context
    job_finish(job=job, state=JobState.COMPLETE, message=outcome.message or "Complete.")
    job.save()
    return "complete"


def job_finish(*, job: Job, state: str, message: str = "", error: str = "") -> None:
    """End the job in ``state`` (complete, failed, cancelled); the caller saves it."""
    job.state = state
    _step_clear(job)
    job.checkpoint_kind = ""
    job.checkpoint = None
    job.finished = timezone.now()
    if message:
        job.progress_message = message[:PROGRESS_MESSAGE_MAX_CHARS]
    if error:
        job.error = error[:ERROR_MAX_CHARS]


def _step_clear(job: Job) -> None:
    job.step = ""
    job.step_token = None
    job.step_worker = ""
    job.step_heartbeat = None


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

"""Starting, deciding and cancelling jobs: each one transaction that changes the job's row and,
when work follows, enqueues the next step in that same transaction (the task queue's rows live in
the same database), so a crash either loses both or neither.

Every function takes the caller's tenant and person; another person's job is ``JobNotFound``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from jobs import errors
from jobs.checkpoints import checkpoint_parse, checkpoint_pending, checkpoint_shown_before
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


@dataclass(frozen=True)
class Decided:
    """The job as it stands after a decision; ``repeat_of`` names the checkpoint of the earlier,
    identical decision this call repeated, when it stored nothing."""

    job: Job
    repeat_of: str | None = None


def job_decide(
    *,
    tenant_id: int,
    user_id: int,
    job_id: object,
    action: object,
    data: Mapping[str, Any] | None = None,
    note: str | None = None,
    channel: str = "mcp",
    checkpoint: object = None,
    arrived: float | None = None,
) -> Decided:
    """Apply the person's decision at the checkpoint it answers (``jobs.checkpoints``).

    ``checkpoint`` names it; without a name the decision answers the last checkpoint shown to the
    person before ``arrived`` (when the request came in; now if not given). It is stored only if
    the job still waits at that checkpoint, checked and written in one transaction on the locked
    row. The same decision again, for a checkpoint it already decided, stores nothing and is
    answered with the job as it stands; any other decision for a checkpoint that has passed is
    refused, naming where the job is now.
    """
    if not isinstance(action, str) or action not in ACTIONS:
        raise errors.invalid_action(action=str(action), allowed=ACTIONS)
    if data is not None and not isinstance(data, Mapping):
        raise InvalidInput("data must be an object.")
    if checkpoint is not None and (not isinstance(checkpoint, str) or checkpoint_parse(checkpoint) is None):
        raise errors.invalid_checkpoint(checkpoint=checkpoint)
    note_text = _note_checked(note)
    stored_data = _as_stored(data)
    with transaction.atomic():
        job = job_get(tenant_id=tenant_id, user_id=user_id, job_id=job_id, for_update=True)
        pending = checkpoint_pending(job)
        if checkpoint is not None:
            named: str | None = str(checkpoint)
        else:
            named = checkpoint_shown_before(job=job, arrived=time.time() if arrived is None else arrived)
        if named is None or named != pending:
            _repeat_check(
                job=job, user_id=user_id, named=named, pending=pending, action=action, data=stored_data
            )
            return Decided(job=job, repeat_of=named)
        outcome = job_kind_get(job.kind).decide(job=job_view(job), action=action, data=data)
        JobDecision.objects.create(
            job=job,
            user_id=user_id,
            iteration=job.iteration,
            checkpoint_kind=job.checkpoint_kind,
            action=action,
            data=stored_data,
            note=note_text,
            channel=channel,
        )
        _apply_decision(job=job, outcome=outcome)
    return Decided(job=job)


def _same(decision: JobDecision, *, user_id: int, action: str, data: dict[str, Any] | None) -> bool:
    return (decision.user_id, decision.action, decision.data) == (user_id, action, data)


def _repeat_check(
    *,
    job: Job,
    user_id: int,
    named: str | None,
    pending: str | None,
    action: str,
    data: dict[str, Any] | None,
) -> None:
    """Returns when this decision repeats the one stored for ``named``; otherwise raises the
    refusal that says where the job is."""
    parsed = checkpoint_parse(named) if named is not None else None
    if parsed is not None:
        kind, iteration = parsed
        earlier = JobDecision.objects.filter(job=job, checkpoint_kind=kind, iteration=iteration).first()
        if earlier is not None and _same(earlier, user_id=user_id, action=action, data=data):
            return
        if earlier is not None and not job.is_finished:
            raise errors.checkpoint_decided(
                checkpoint=named or "", action=earlier.action, now=_where(job, pending)
            )
    if job.is_finished:
        raise errors.already_finished(state=job.state, error=job.error)
    if pending is None:
        raise errors.no_pending_checkpoint(state=job.get_state_display().lower())
    if named is None:
        raise errors.checkpoint_not_shown(checkpoint=pending)
    raise errors.checkpoint_not_pending(checkpoint=named, now=_where(job, pending))


def _as_stored(data: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The data as the JSON column gives it back (tuples as lists, and so on), to compare."""
    if data is None:
        return None
    try:
        return json.loads(json.dumps(dict(data)))
    except (TypeError, ValueError, RecursionError) as error:
        raise InvalidInput("data must be a JSON object of reasonable depth.") from error


def _where(job: Job, pending: str | None) -> str:
    if pending is not None:
        return f"waits at checkpoint {pending!r}"
    return f"is {job.get_state_display().lower()}"


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

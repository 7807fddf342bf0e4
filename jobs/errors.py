"""The job engine's refusals, in the one error hierarchy (``core.errors``).

An unknown id and another person's id are the same ``JobNotFound`` (-32002): an id copied from
someone else confirms nothing. The rest say what the job's state does not allow, and what to do.
"""

from __future__ import annotations

from core.errors import InvalidInput, NotFound

JOB_NOT_FOUND = "Unknown session: no job of yours has the id {job_id}."


class JobNotFound(NotFound):
    def __init__(self, *, job_id: object) -> None:
        super().__init__(JOB_NOT_FOUND.format(job_id=str(job_id)[:80]), data={"reason": "unknown_session"})


class JobStateError(InvalidInput):
    """The request does not fit the job's state (``reason`` names which case, for clients)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message, data={"reason": reason})


def no_pending_checkpoint(*, state: str) -> JobStateError:
    return JobStateError(
        f"No pending checkpoint: the job is {state}; call get_session to follow it.",
        reason="no_pending_checkpoint",
    )


def already_finished(*, state: str, error: str = "") -> JobStateError:
    if state == "complete":
        return JobStateError(
            "The job is already complete; export_results gives its result.", reason="already_complete"
        )
    if state == "failed":
        return JobStateError(
            f"The job failed: {error or 'no reason was recorded'}.", reason="workflow_failed"
        )
    return JobStateError("The job was cancelled; nothing of it runs again.", reason="cancelled")


def invalid_action(*, action: str, allowed: tuple[str, ...]) -> JobStateError:
    return JobStateError(
        f"Invalid action {action[:40]!r}: use one of {', '.join(allowed)}.", reason="invalid_action"
    )


def not_complete(*, state: str) -> JobStateError:
    return JobStateError(
        f"The job is {state}, not complete: results can be exported once the final selection is approved.",
        reason="not_complete",
    )


def invalid_checkpoint(*, checkpoint: object) -> JobStateError:
    return JobStateError(
        f"Invalid checkpoint {str(checkpoint)[:60]!r}: name it as get_session gives it (like 'plan-0').",
        reason="invalid_checkpoint",
    )


def checkpoint_decided(*, checkpoint: str, action: str, now: str) -> JobStateError:
    return JobStateError(
        f"Checkpoint {checkpoint!r} was already decided ({action}); the job now {now}.",
        reason="checkpoint_decided",
    )


def checkpoint_not_pending(*, checkpoint: str, now: str) -> JobStateError:
    return JobStateError(
        f"Checkpoint {checkpoint!r} is not the one pending: the job {now}; call get_session to see it.",
        reason="checkpoint_not_pending",
    )


def checkpoint_not_shown(*, checkpoint: str) -> JobStateError:
    return JobStateError(
        f"The job waits at checkpoint {checkpoint!r}, which you have not been shown yet: call "
        "get_session to see it, then decide naming that checkpoint.",
        reason="checkpoint_not_shown",
    )

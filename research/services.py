"""The literature search as its callers use it (MCP tools, stdio, pages, MCP tasks): start one,
decide, cancel, and the JSON shapes of a job's state that every one of them returns.

The engine (``jobs``) keeps a job to its tenant and person; these functions take both and never
reach another person's job (``jobs.errors.JobNotFound``, -32002).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs import errors
from jobs.checkpoints import checkpoint_pending
from jobs.models import Job, JobState
from jobs.selectors import job_get
from jobs.services import Decided, job_cancel, job_decide, job_start
from research.literature_job import KIND

# How long search_papers and decide wait, at most, for the job to reach its next checkpoint.
WAIT_SECONDS = 25.0


def search_start(
    *,
    tenant_id: int,
    user_id: int,
    query: object,
    domain: object = "general",
    max_results: object = 100,
    origin: str = "",
    client_id: str = "",
) -> Job:
    return job_start(
        tenant_id=tenant_id,
        user_id=user_id,
        kind=KIND,
        job_input={"query": query, "domain": domain, "max_results": max_results},
        origin=origin,
        client_id=client_id,
    )


def search_get(*, tenant_id: int, user_id: int, session_id: object) -> Job:
    """The caller's literature search ``session_id`` (a job of another kind is not one)."""
    job = job_get(tenant_id=tenant_id, user_id=user_id, job_id=session_id)
    if job.kind != KIND:
        raise errors.JobNotFound(job_id=session_id)
    return job


def search_decide(
    *,
    tenant_id: int,
    user_id: int,
    session_id: object,
    action: object,
    data: Mapping[str, Any] | None = None,
    note: str | None = None,
    channel: str = "mcp",
    checkpoint: object = None,
    arrived: float | None = None,
) -> Decided:
    """The person's decision (``jobs.services.job_decide``: at the checkpoint it names, or the last
    one shown to them before ``arrived``)."""
    search_get(tenant_id=tenant_id, user_id=user_id, session_id=session_id)
    return job_decide(
        tenant_id=tenant_id,
        user_id=user_id,
        job_id=session_id,
        action=action,
        data=data,
        note=note,
        channel=channel,
        checkpoint=checkpoint,
        arrived=arrived,
    )


def search_cancel(*, tenant_id: int, user_id: int, session_id: object) -> Job:
    search_get(tenant_id=tenant_id, user_id=user_id, session_id=session_id)
    return job_cancel(tenant_id=tenant_id, user_id=user_id, job_id=session_id)


def search_next_state(*, job: Job) -> dict[str, Any]:
    """What search_papers and decide answer: the pending checkpoint, the result, or where it is.

    ``{session_id, checkpoint: {kind, summary, ...payload}}`` while waiting;
    ``{session_id, result: {paper_count, summary}}`` once complete; otherwise
    ``{session_id, status, message}`` (still running after the wait, failed, cancelled).
    """
    state: dict[str, Any] = {"session_id": str(job.id), "iteration": job.iteration}
    if job.state == JobState.WAITING:
        state["checkpoint"] = search_checkpoint_view(job=job)
    elif job.state == JobState.COMPLETE:
        result = job.result or {}
        state["result"] = {"paper_count": result.get("paper_count", 0), "summary": result.get("summary", "")}
    else:
        state["status"] = job.state
        state["message"] = job.error or job.progress_message
    return state


def search_repeat_message(*, job: Job, repeat_of: str) -> str:
    """What a decision that repeated an earlier one is told: nothing was stored."""
    pending = checkpoint_pending(job)
    message = (
        f"Your identical decision at checkpoint {repeat_of!r} was already stored; this call stored nothing."
    )
    if pending is not None:
        message += f" To decide checkpoint {pending!r}, call decide with checkpoint {pending!r}."
    return message


def search_checkpoint_view(*, job: Job) -> dict[str, Any]:
    """The pending checkpoint as the tools show it: its name (what decide's ``checkpoint`` takes),
    kind and summary, then its payload."""
    payload = {key: value for key, value in dict(job.checkpoint or {}).items() if key not in ("id", "kind")}
    return {
        "id": checkpoint_pending(job),
        "kind": job.checkpoint_kind,
        "summary": payload.pop("summary", ""),
        **payload,
    }


def search_session_state(*, job: Job) -> dict[str, Any]:
    """What get_session answers: where the job stands, with the pending checkpoint in full."""
    return {
        "session_id": str(job.id),
        "query": (job.input or {}).get("query", ""),
        "status": job.state,
        "is_complete": job.state == JobState.COMPLETE,
        "has_pending_checkpoint": job.state == JobState.WAITING,
        "current_checkpoint_kind": job.checkpoint_kind or None,
        "current_checkpoint": checkpoint_pending(job),
        "checkpoint": search_checkpoint_view(job=job) if job.state == JobState.WAITING else None,
        "iteration": job.iteration,
        "progress": job.progress,
        "message": job.progress_message,
        "error": job.error or None,
    }


def search_result(*, tenant_id: int, user_id: int, session_id: object) -> dict[str, Any]:
    """The complete job's result (for exports); refuses a job that is not complete."""
    job = search_get(tenant_id=tenant_id, user_id=user_id, session_id=session_id)
    if job.state != JobState.COMPLETE:
        if job.state in (JobState.FAILED, JobState.CANCELLED):
            raise errors.already_finished(state=job.state, error=job.error)
        raise errors.not_complete(state=job.get_state_display().lower())
    return dict(job.result or {})

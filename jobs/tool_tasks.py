"""The ``ToolTaskRunner`` of MCP tool tasks (``mcp_gateway.kernel.tool_tasks_2026_07_28``): each task is a
job of the ``mcp.tool_call`` kind (``jobs.tool_task_kind``), so it lives in PostgreSQL, runs on the task
queue, survives a worker's restart (the engine's recovery) and belongs to its person and tenant: any other
caller, like a malformed or unknown id or a task past its ttl, gets ``NotFound``.

Status: a running job is ``working``; one at its ``input_required`` checkpoint is
``input_required``; a complete job is ``completed`` with the tool's result, or ``failed`` with the
JSON-RPC error it kept; a job the engine failed (a step that crashed in the engine, or was
interrupted too many times) is ``failed`` with -32603 and the engine's message; a cancelled job is
``cancelled``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.db import db_call
from core.errors import InvalidInput, NotFound
from core.identity import Identity
from jobs.checkpoints import checkpoint_pending
from jobs.errors import JobNotFound
from jobs.models import Job, JobState
from jobs.selectors import job_id_parse, jobs_of
from jobs.services import job_cancel, job_decide, job_start
from jobs.steps import job_finish
from jobs.tool_task_kind import (
    INPUT_CHECKPOINT,
    TOOL_TASK_KIND,
    identity_dump,
    wire_dump,
    wire_load,
)
from mcp_gateway.kernel.tool_tasks_2026_07_28 import ToolTask, ToolTaskStatus

# A task is kept a day unless the client asks otherwise, between a minute and a week.
TTL_DEFAULT_MS = 24 * 3600 * 1000
TTL_MIN_MS = 60 * 1000
TTL_MAX_MS = 7 * 24 * 3600 * 1000
# How often a client should poll a task that is not finished.
POLL_INTERVAL_MS = 1000
# What a client's request may put in a task's row (the HTTP body is bounded at 4 MiB already).
ARGUMENTS_MAX_BYTES = 1024 * 1024
CAPABILITIES_MAX_BYTES = 64 * 1024
INPUT_RESPONSES_MAX_BYTES = 1024 * 1024
TOOL_NAME_MAX_CHARS = 200
# Expired tasks are deleted by the workers, this many at a time, this often.
EXPIRE_BATCH = 1000
EXPIRE_INTERVAL_SECONDS = 300
# The error of a job the engine failed (its message is the engine's, meant for the person).
INTERNAL_ERROR = -32603

UNKNOWN_TASK = "Unknown task: no task of yours has that id."
# The checkpoint's answers so far, while some of its input requests are still unanswered.
GATHERED_KEY = "gatheredResponses"
NOT_WAITING = "The task is {status}, not waiting for input: nothing to update."
TOO_LARGE = "{what} is larger than {limit} bytes."
NOT_ENCODABLE = "{what} cannot be stored: {reason}."


class TaskNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__(UNKNOWN_TASK)


def ttl_ms_chosen(requested: int | None) -> int:
    if requested is None:
        return TTL_DEFAULT_MS
    return max(TTL_MIN_MS, min(int(requested), TTL_MAX_MS))


def _text(value: Any, *, what: str, limit: int) -> str:
    try:
        text = wire_dump(value)
    except (TypeError, ValueError) as problem:
        raise InvalidInput(NOT_ENCODABLE.format(what=what, reason=problem)) from None
    if len(text) > limit:
        raise InvalidInput(TOO_LARGE.format(what=what, limit=limit))
    return text


def tool_task_input(
    *,
    identity: Identity,
    tool: str,
    arguments: Mapping[str, Any],
    client_capabilities: Mapping[str, Any],
    ttl_ms: int | None,
) -> dict[str, Any]:
    """The job's input: what the task's calls need, the client's parts as JSON text."""
    if not isinstance(tool, str) or not tool or len(tool) > TOOL_NAME_MAX_CHARS or "\x00" in tool:
        raise InvalidInput("The tool name is not one a task can run.")
    return {
        "tool": tool,
        "arguments": _text(dict(arguments), what="The arguments", limit=ARGUMENTS_MAX_BYTES),
        "client_capabilities": _text(
            dict(client_capabilities), what="The client capabilities", limit=CAPABILITIES_MAX_BYTES
        ),
        "identity": identity_dump(identity),
        "ttl_ms": ttl_ms_chosen(ttl_ms),
    }


def tool_task_job_get(*, identity: Identity, task_id: object, for_update: bool = False) -> Job:
    """The caller's task's job; ``TaskNotFound`` for anything else (another person's or tenant's,
    another kind of job, malformed, unknown, past its ttl)."""
    try:
        parsed = job_id_parse(job_id=task_id)
    except JobNotFound:
        raise TaskNotFound() from None
    queryset = jobs_of(tenant_id=identity.tenant_id, user_id=identity.user_id).filter(
        kind=TOOL_TASK_KIND, pk=parsed
    )
    if for_update:
        queryset = queryset.select_for_update()
    job = queryset.first()
    if job is None or _expired(job):
        raise TaskNotFound()
    return job


def _expired(job: Job) -> bool:
    ttl = job.input.get("ttl_ms")
    return isinstance(ttl, int) and job.created + timedelta(milliseconds=ttl) < timezone.now()


def tool_task_of(job: Job) -> ToolTask:
    status: ToolTaskStatus
    result = error = input_requests = None
    if job.state == JobState.RUNNING:
        status = "working"
    elif job.state == JobState.WAITING:
        status = "input_required"
        input_requests = wire_load((job.checkpoint or {}).get("inputRequests")) or {}
    elif job.state == JobState.COMPLETE:
        kept = job.result or {}
        if "error" in kept:
            status, error = "failed", wire_load(kept["error"])
        else:
            status, result = "completed", wire_load(kept.get("result"))
    elif job.state == JobState.FAILED:
        status, error = "failed", {"code": INTERNAL_ERROR, "message": job.error or "The task failed."}
    else:
        status = "cancelled"
    ttl = job.input.get("ttl_ms")
    return ToolTask(
        task_id=str(job.pk),
        status=status,
        created_at=job.created,
        last_updated_at=max(job.updated, job.finished or job.updated),
        ttl_ms=ttl if isinstance(ttl, int) else None,
        poll_interval_ms=None if job.is_finished else POLL_INTERVAL_MS,
        status_message=job.progress_message,
        result=result,
        error=error,
        input_requests=input_requests,
    )


def tool_task_start(
    *,
    identity: Identity,
    tool: str,
    arguments: Mapping[str, Any],
    client_capabilities: Mapping[str, Any],
    ttl_ms: int | None,
) -> ToolTask:
    job_input = tool_task_input(
        identity=identity,
        tool=tool,
        arguments=arguments,
        client_capabilities=client_capabilities,
        ttl_ms=ttl_ms,
    )
    job = job_start(
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        kind=TOOL_TASK_KIND,
        job_input=job_input,
        origin=f"tool task {tool}",
        client_id=identity.client_id,
    )
    return tool_task_of(job)


def tool_task_get(*, identity: Identity, task_id: object) -> ToolTask:
    return tool_task_of(tool_task_job_get(identity=identity, task_id=task_id))


def tool_task_update(*, identity: Identity, task_id: object, input_responses: Mapping[str, Any]) -> None:
    """Answer the task's input requests. Once every pending request has an answer it runs on (a new
    step calls the tool with all of them); until then the answers are kept and the task stays
    ``input_required`` with only the requests still unanswered (SEP-2663's partial fulfillment)."""
    if not isinstance(input_responses, Mapping):
        raise InvalidInput("inputResponses must be an object.")
    _text(dict(input_responses), what="The input responses", limit=INPUT_RESPONSES_MAX_BYTES)
    with transaction.atomic():
        job = tool_task_job_get(identity=identity, task_id=task_id, for_update=True)
        if job.state != JobState.WAITING or job.checkpoint_kind != INPUT_CHECKPOINT:
            raise InvalidInput(
                NOT_WAITING.format(status=tool_task_of(job).status), data={"taskId": str(job.pk)}
            )
        checkpoint = dict(job.checkpoint or {})
        pending = wire_load(checkpoint.get("inputRequests")) or {}
        gathered = {
            **(wire_load(checkpoint.get(GATHERED_KEY)) or {}),
            **{key: value for key, value in input_responses.items() if key in pending},
        }
        remaining = {key: value for key, value in pending.items() if key not in gathered}
        text = _text(gathered, what="The input responses", limit=INPUT_RESPONSES_MAX_BYTES)
        if remaining:
            checkpoint.update({"inputRequests": wire_dump(remaining), GATHERED_KEY: text})
            Job.objects.filter(pk=job.pk).update(checkpoint=checkpoint, updated=timezone.now())
            return
        job_decide(
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            job_id=job.pk,
            action="approve",
            data={"inputResponses": text},
            channel="mcp",
            # The round these answers were given for, checked above on the locked row.
            checkpoint=checkpoint_pending(job),
        )


def tool_task_cancel(*, identity: Identity, task_id: object) -> None:
    """Cancel the task now; a finished one is left as it is."""
    with transaction.atomic():
        job = tool_task_job_get(identity=identity, task_id=task_id, for_update=True)
        if job.is_finished:
            return
        job_cancel(tenant_id=identity.tenant_id, user_id=identity.user_id, job_id=job.pk)


def tool_tasks_expire(*, now: datetime | None = None, batch: int = EXPIRE_BATCH) -> int:
    """Delete the tool tasks past their ttl (a running one is cancelled first, which stops its
    call, and deleted on a later round); returns how many rows changed. Run by every jobs worker
    (``manage.py jobs_worker``) every ``EXPIRE_INTERVAL_SECONDS``."""
    now = now or timezone.now()
    rows = (
        Job.objects.filter(kind=TOOL_TASK_KIND, created__lt=now - timedelta(milliseconds=TTL_MIN_MS))
        .order_by("created")
        .values_list("pk", "created", "input__ttl_ms")[:batch]
    )
    expired = [
        pk
        for pk, created, ttl in rows
        if isinstance(ttl, int) and created + timedelta(milliseconds=ttl) < now
    ]
    changed = 0
    for pk in expired:
        with transaction.atomic():
            job = Job.objects.select_for_update(skip_locked=True).filter(pk=pk).first()
            if job is None:
                continue
            if job.state == JobState.RUNNING:
                job_finish(job=job, state=JobState.CANCELLED, message="Expired.")
                job.save()
            else:
                job.delete()
            changed += 1
    return changed


class JobToolTaskRunner:
    """``mcp_gateway.kernel.tool_tasks_2026_07_28.ToolTaskRunner`` on the job engine; registered by
    ``JobsConfig``."""

    async def start(
        self,
        *,
        identity: Identity,
        tool: str,
        arguments: dict[str, Any],
        client_capabilities: dict[str, Any],
        ttl_ms: int | None,
    ) -> ToolTask:
        return await db_call(
            tool_task_start,
            identity=identity,
            tool=tool,
            arguments=arguments,
            client_capabilities=client_capabilities,
            ttl_ms=ttl_ms,
        )

    async def get(self, *, identity: Identity, task_id: str) -> ToolTask:
        return await db_call(tool_task_get, identity=identity, task_id=task_id)

    async def update(self, *, identity: Identity, task_id: str, input_responses: dict[str, Any]) -> None:
        await db_call(tool_task_update, identity=identity, task_id=task_id, input_responses=input_responses)

    async def cancel(self, *, identity: Identity, task_id: str) -> None:
        await db_call(tool_task_cancel, identity=identity, task_id=task_id)

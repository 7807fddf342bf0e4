"""The literature search as a task of the 2026-07-28 tasks extension
(``mcp_gateway.kernel.tool_tasks_2026_07_28``): a task-augmented ``search_papers`` IS the literature job,
its id the job's (as on 2025-11-25, ``research.tasks``), so ``tasks/*``, the research tools and the research
page all follow one job.

The job waiting at a checkpoint is the task ``input_required``, its input request a form asking for
the decision (``research.task_forms``); ``tasks/update`` with the form's answer is the decision,
made through ``search_decide`` like the tool's and the page's, so the kind validates it, the job's
history records it (channel ``mcp-task``) and an answer it refuses is -32602 with the job still
waiting. ``tasks/cancel`` cancels the job. A complete job is ``completed`` with what
``search_papers``/``decide`` answer for it; a failed one ``failed`` with its error; a stopped or
cancelled one ``cancelled``.

Registered for ``search_papers`` by ``ResearchConfig.ready``; every other tool's tasks stay the
generic runner's (``jobs.tool_tasks``), whose ``NotFound`` for a literature job (and this runner's
for any other job) is how the endpoint finds which runner a task id belongs to.
"""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import transaction

from accounts.scopes import SCOPE_WRITE
from core.db import db_call
from core.errors import InsufficientScope, InvalidInput
from core.identity import Identity
from jobs.checkpoints import checkpoint_shown
from jobs.errors import JobNotFound, JobStateError
from jobs.models import Job, JobState
from jobs.selectors import job_get
from mcp_gateway.kernel.rbac import missing_scopes
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.tool_tasks_2026_07_28 import ToolTask
from mcp_gateway.kernel.toolset_access import toolsets_enabled
from research.services import search_cancel, search_decide, search_get, search_next_state, search_start
from research.task_forms import decision_of, input_requests_of, request_key
from research.tasks import SEARCH_TOOL, STATUSES
from research.tool_answers import next_state_answer

CHANNEL = "mcp-task"
TOOLSET = "research"
# Steps take seconds; a decision takes a person.
POLL_WORKING_MS = 1000
POLL_WAITING_MS = 5000
# The error of a job that failed (its message is the kind's or the engine's, meant for the person).
INTERNAL_ERROR = -32603
# Deciding and cancelling change the search: what decide and cancel_session need.
WRITE_SCOPES = frozenset({SCOPE_WRITE})

WAITING = (
    "Waiting for your decision at the {kind} checkpoint: answer the input request with tasks/update "
    "(or decide with session_id {job_id}, or the research page)."
)


def literature_tool_task(*, job: Job) -> ToolTask:
    """The literature job as the task ``tasks/get`` shows."""
    status = STATUSES[job.state]
    result = error = input_requests = None
    message = job.progress_message
    if status == "input_required":
        input_requests = input_requests_of(job=job)
        message = WAITING.format(kind=job.checkpoint_kind, job_id=job.id)
    elif status == "completed":
        result = next_state_answer(state=search_next_state(job=job)).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
    elif status == "failed":
        error = {"code": INTERNAL_ERROR, "message": job.error or "The literature search failed."}
    return ToolTask(
        task_id=str(job.id),
        status=status,
        created_at=job.created,
        last_updated_at=max(job.updated, job.finished or job.updated),
        # Jobs are kept until they are deleted (the research page lists them).
        ttl_ms=None,
        poll_interval_ms=None
        if job.is_finished
        else (POLL_WAITING_MS if status == "input_required" else POLL_WORKING_MS),
        status_message=(message or "")[:500],
        result=result,
        error=error,
        input_requests=input_requests,
    )


def literature_task_job(*, identity: Identity, task_id: str) -> Job:
    """The caller's literature job ``task_id``, while the research toolset is on for their tenant
    (off, its tasks are nobody's, as 2025-11-25's are); ``JobNotFound`` otherwise."""
    if TOOLSET not in toolsets_enabled(tenant_id=identity.tenant_id, registry=default_registry()):
        raise JobNotFound(job_id=task_id)
    return search_get(tenant_id=identity.tenant_id, user_id=identity.user_id, session_id=task_id)


def literature_task_get(*, identity: Identity, task_id: str) -> ToolTask:
    job = literature_task_job(identity=identity, task_id=task_id)
    # Its input request shows the pending checkpoint (decide may follow it without naming it).
    checkpoint_shown(job=job)
    return literature_tool_task(job=job)


def _write_scope(identity: Identity) -> None:
    missing = missing_scopes(required=WRITE_SCOPES, granted=identity.scopes)
    if missing:
        raise InsufficientScope(required=WRITE_SCOPES, missing=missing)


def literature_task_update(*, identity: Identity, task_id: str, input_responses: dict[str, Any]) -> None:
    """Decide the pending checkpoint with the answer to its input request (nothing is decided when
    the person declined the form). Locked, so an answer meant for a checkpoint already decided is
    refused rather than applied to the next one."""
    literature_task_job(identity=identity, task_id=task_id)
    _write_scope(identity)
    with transaction.atomic():
        job = job_get(tenant_id=identity.tenant_id, user_id=identity.user_id, job_id=task_id, for_update=True)
        if job.state != JobState.WAITING:
            raise InvalidInput(
                f"The task is {STATUSES[job.state]}, not waiting for input: nothing to update.",
                data={"taskId": str(job.id)},
            )
        decision = decision_of(job=job, input_responses=input_responses)
        if decision is None:
            return
        search_decide(
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            session_id=task_id,
            action=decision.action,
            data=decision.data,
            note=decision.note,
            channel=CHANNEL,
            # The checkpoint whose input request this answers (decision_of checked its key).
            checkpoint=request_key(job=job),
        )


def literature_task_cancel(*, identity: Identity, task_id: str) -> None:
    """Cancel the job; a finished one is left as it is (tasks/cancel is idempotent)."""
    job = literature_task_job(identity=identity, task_id=task_id)
    _write_scope(identity)
    if job.is_finished:
        return
    with contextlib.suppress(JobStateError):  # finished meanwhile
        search_cancel(tenant_id=identity.tenant_id, user_id=identity.user_id, session_id=task_id)


class LiteratureTaskRunner:
    """``mcp_gateway.kernel.tool_tasks_2026_07_28.ToolTaskRunner`` of ``search_papers``: the task is the
    job."""

    tools: frozenset[str] = frozenset({SEARCH_TOOL})

    async def start(
        self,
        *,
        identity: Identity,
        tool: str,
        arguments: dict[str, Any],
        client_capabilities: dict[str, Any],
        ttl_ms: int | None,
    ) -> ToolTask:
        job = await db_call(
            search_start,
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            query=arguments.get("query"),
            domain=arguments.get("domain", "general"),
            max_results=arguments.get("max_results", 100),
            origin="mcp task",
            client_id=identity.client_id,
        )
        return literature_tool_task(job=job)

    async def get(self, *, identity: Identity, task_id: str) -> ToolTask:
        return await db_call(literature_task_get, identity=identity, task_id=task_id)

    async def update(self, *, identity: Identity, task_id: str, input_responses: dict[str, Any]) -> None:
        await db_call(
            literature_task_update, identity=identity, task_id=task_id, input_responses=input_responses
        )

    async def cancel(self, *, identity: Identity, task_id: str) -> None:
        await db_call(literature_task_cancel, identity=identity, task_id=task_id)


literature_task_runner = LiteratureTaskRunner()

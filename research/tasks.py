"""The literature search as MCP tasks (``mcp_gateway.kernel.tasks_2025_11_25``): a task-augmented
``search_papers`` starts the same job the tool starts, and the task id is the job id, so ``tasks/*``, the
research tools and the pages all follow one job.

A job can wait days for a person's decision, which the protocol's ``tasks/result`` ("block until
the task is terminal") cannot sit through on one HTTP request. So ``tasks/result`` answers what
``search_papers`` and ``decide`` answer: it waits (bounded, as they do) while the job runs, then
gives the pending checkpoint, the result, or where the job stands (``docs/mcp-tasks.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accounts.scopes import SCOPE_READ, SCOPE_WRITE
from core.db import db_call
from core.identity import Identity
from jobs.models import Job, JobState
from jobs.waiting import job_wait
from mcp_gateway.kernel.tasks_2025_11_25 import TaskMethod, TaskState, TaskStatus
from mcp_gateway.kernel.tool_results import tool_result
from research.services import (
    WAIT_SECONDS,
    search_cancel,
    search_get,
    search_next_state,
    search_start,
)

SEARCH_TOOL = "search_papers"
# Steps take seconds; a decision takes a person. A client polls this often at most.
POLL_INTERVAL_MS = 5000

STATUSES: dict[str, TaskStatus] = {
    JobState.RUNNING: "working",
    JobState.WAITING: "input_required",
    JobState.COMPLETE: "completed",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "cancelled",
}

WAITING_MESSAGE = (
    "Waiting for your decision on the {kind} checkpoint: tasks/result shows it; answer with the "
    "decide tool (session_id {job_id}) or on the research page."
)


def task_state(*, job: Job) -> TaskState:
    """The job as the protocol's ``Task``: its id, its status and a message saying what it waits for."""
    status = STATUSES[job.state]
    if status == "input_required":
        message = WAITING_MESSAGE.format(kind=job.checkpoint_kind or "next", job_id=job.id)
    elif status == "completed":
        message = str((job.result or {}).get("summary", "")) or "Complete."
    elif status == "failed":
        message = job.error or "The job failed."
    elif status == "cancelled":
        message = "Cancelled: nothing of this job runs again."
    else:
        message = job.progress_message or "Searching."
    return TaskState(
        task_id=str(job.id),
        status=status,
        status_message=message[:500],
        created_at=job.created,
        last_updated_at=job.updated,
        # Jobs are kept until they are deleted; the protocol's null says so.
        ttl_ms=None,
        poll_interval_ms=POLL_INTERVAL_MS,
    )


def task_result(*, job: Job) -> dict[str, Any]:
    """What ``search_papers`` would answer for the job as it stands, as a tool result on the wire."""
    state = search_next_state(job=job)
    result = tool_result(structured=state)
    result.is_error = job.state in (JobState.FAILED, JobState.CANCELLED)
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


@dataclass(frozen=True)
class LiteratureTasks:
    """``search_papers`` as a task; ``tasks/*`` on the caller's literature search jobs."""

    tools: frozenset[str] = frozenset({SEARCH_TOOL})

    def scopes_for(self, *, method: TaskMethod) -> frozenset[str]:
        return frozenset({SCOPE_WRITE}) if method == "tasks/cancel" else frozenset({SCOPE_READ})

    async def start(
        self, *, identity: Identity, tool: str, arguments: dict[str, Any], session_id: str
    ) -> TaskState:
        job = await db_call(
            search_start,
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            query=arguments.get("query"),
            domain=arguments.get("domain", "general"),
            max_results=arguments.get("max_results", 100),
            origin=session_id,
            client_id=identity.client_id,
        )
        return task_state(job=job)

    async def get(self, *, identity: Identity, task_id: str) -> TaskState:
        job = await db_call(
            search_get, tenant_id=identity.tenant_id, user_id=identity.user_id, session_id=task_id
        )
        return task_state(job=job)

    async def result(self, *, identity: Identity, task_id: str) -> dict[str, Any]:
        job = await db_call(
            search_get, tenant_id=identity.tenant_id, user_id=identity.user_id, session_id=task_id
        )
        if job.state == JobState.RUNNING:
            job = await job_wait(
                tenant_id=identity.tenant_id,
                user_id=identity.user_id,
                job_id=job.id,
                timeout_seconds=WAIT_SECONDS,
            )
        return task_result(job=job)

    async def cancel(self, *, identity: Identity, task_id: str) -> TaskState:
        job = await db_call(
            search_cancel, tenant_id=identity.tenant_id, user_id=identity.user_id, session_id=task_id
        )
        return task_state(job=job)


literature_tasks = LiteratureTasks()

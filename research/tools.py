"""The ``research`` toolset's tools: thin handlers over ``research.services``.

search_papers and decide start work that runs in a worker (``jobs``), then wait, bounded
(``research.services.WAIT_SECONDS``), for the job's next checkpoint or its end, sending an MCP
progress notification each time the job's step counter rises; a wait that ends first answers
``status: running`` and the job goes on without the client. The session id is the job's id, kept
to its person and tenant. Refusals are tool results with ``isError`` (``research.tool_answers``).
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from accounts.scopes import SCOPE_READ, SCOPE_WRITE
from core.db import db_call
from core.identity import Identity
from jobs import errors
from jobs.checkpoints import CHECKPOINT_NAME_MAX_CHARS, checkpoint_shown
from jobs.models import Job, JobState
from jobs.waiting import job_wait
from mcp_gateway.kernel.identity import identity_from_context, session_id_from_context
from mcp_gateway.kernel.registry import tool
from research import services
from research.exports import export_render
from research.literature_job import MAX_RESULTS_MAX, QUERY_MAX_CHARS
from research.tool_answers import (
    TOOL_ERRORS,
    ExportAnswer,
    NextState,
    SessionState,
    answer,
    next_state_answer,
    refusal_of,
)

# Past the wait, with room for the start and the answer.
TOOL_TIMEOUT_SECONDS = services.WAIT_SECONDS + 30.0
SESSION_ID_MAX_CHARS = 100
# How often a waiting call reads the job's row (the worker may be on another machine).
POLL_SECONDS = 0.25

SessionId = Annotated[
    str, Field(max_length=SESSION_ID_MAX_CHARS, description="The session_id search_papers returned.")
]


async def _next_state(*, ctx: Context, job: Job, repeat_of: str | None = None) -> CallToolResult:
    """Wait (bounded) for the job to stop running, reporting progress; then its state, its pending
    checkpoint recorded as shown."""
    identity = identity_from_context(ctx)

    async def progress(done: int, message: str) -> None:
        await ctx.report_progress(done, None, message or None)

    job = await job_wait(
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        job_id=job.id,
        # Read at call time, so that a deployment or a test can change it.
        timeout_seconds=services.WAIT_SECONDS,
        on_progress=progress,
        poll_seconds=POLL_SECONDS,
    )
    if job.state == JobState.FAILED:
        # As decide on it would answer later (reason workflow_failed, with its error).
        return refusal_of(errors.already_finished(state=job.state, error=job.error))
    state = services.search_next_state(job=job)
    if repeat_of is not None:
        state["message"] = services.search_repeat_message(job=job, repeat_of=repeat_of)
    await db_call(checkpoint_shown, job=job)
    return next_state_answer(state=state)


@tool(
    name="search_papers",
    title="Search the literature (with your decisions)",
    description=(
        "Start a literature search that asks you at each step: first the search plan (terms, years, "
        "sources), then the screening of the candidates found, then the final selection. Waits for "
        "the first checkpoint and returns {session_id, checkpoint: {kind, summary, ...}}; answer it "
        "with decide. If the search is still running when the wait ends, returns status running: "
        "follow it with get_session."
    ),
    scopes=[SCOPE_WRITE],
    read_only=False,
    expensive=True,
    timeout_seconds=TOOL_TIMEOUT_SECONDS,
    # On 2026-07-28 a client that speaks the tasks extension gets the search as a task: the task is
    # the job, its checkpoints the task's input requests (research.task_runner, docs/mcp-tasks.md).
    task_support="optional",
)
async def search_papers(
    query: Annotated[str, Field(max_length=QUERY_MAX_CHARS, description="What to search for.")],
    ctx: Context,
    domain: Annotated[
        str, Field(max_length=40, description="general, or a field that picks its sources.")
    ] = "general",
    max_results: Annotated[int, Field(ge=1, le=MAX_RESULTS_MAX)] = 100,
) -> Annotated[CallToolResult, NextState]:
    identity = identity_from_context(ctx)
    session = session_id_from_context(ctx)
    try:
        job = await db_call(
            services.search_start,
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            query=query,
            domain=domain,
            max_results=max_results,
            origin=f"mcp-session:{session}" if session else _channel(identity),
            client_id=identity.client_id,
        )
    except TOOL_ERRORS as error:
        return refusal_of(error)
    return await _next_state(ctx=ctx, job=job)


def _channel(identity: Identity) -> str:
    """How a decision reached the job, for its history: a local stdio session or an MCP client."""
    return "stdio" if identity.over_stdio else "mcp"


@tool(
    name="decide",
    title="Decide at a literature search's checkpoint",
    description=(
        "Answer the pending checkpoint of a literature search. action: approve, edit or reject. "
        "plan: approve; edit with data {terms, year_from, year_to, sources, max_results}; reject stops "
        "the search. screening: approve keeps every candidate; edit with data {keep: [ids or DOIs], "
        "add_dois: [...]}; reject with data (as for the plan) refines the query and searches again. "
        "final: approve completes the search; edit with data {keep: [...]}; reject goes back to "
        "screening. A paper keeps the id it was first shown with (p7) for the whole search; keep "
        "names papers of the pending checkpoint only. Returns the next checkpoint, the result, or "
        "status running."
    ),
    scopes=[SCOPE_WRITE],
    read_only=False,
    timeout_seconds=TOOL_TIMEOUT_SECONDS,
)
async def decide(
    session_id: SessionId,
    action: Annotated[str, Field(max_length=40, description="approve, edit or reject.")],
    ctx: Context,
    data: Annotated[
        dict[str, Any] | None, Field(description="What edit (or a refining reject) changes.")
    ] = None,
    note: Annotated[str | None, Field(description="Why, for the job's history.")] = None,
    checkpoint: Annotated[
        str | None,
        Field(
            max_length=CHECKPOINT_NAME_MAX_CHARS,
            description=(
                "The name of the checkpoint this decides (checkpoint.id, like screening-1): it is "
                "applied only while the job waits there. Without it, the decision answers the last "
                "checkpoint you were shown."
            ),
        ),
    ] = None,
) -> Annotated[CallToolResult, NextState]:
    # Taken before anything waits: a checkpoint shown after this call came in is not what it answers.
    arrived = time.time()
    identity = identity_from_context(ctx)
    try:
        decided = await db_call(
            services.search_decide,
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            session_id=session_id,
            action=action,
            data=data,
            note=note,
            channel=_channel(identity),
            checkpoint=checkpoint,
            arrived=arrived,
        )
    except TOOL_ERRORS as error:
        return refusal_of(error)
    return await _next_state(ctx=ctx, job=decided.job, repeat_of=decided.repeat_of)


@tool(
    name="get_session",
    title="A literature search's state",
    description=(
        "Where a literature search stands: its query, status, whether it is complete, whether a "
        "checkpoint waits for your decision (and which), the iteration, progress and any error."
    ),
    scopes=[SCOPE_READ],
)
async def get_session(session_id: SessionId, ctx: Context) -> Annotated[CallToolResult, SessionState]:
    identity = identity_from_context(ctx)
    try:
        job = await db_call(
            services.search_get, tenant_id=identity.tenant_id, user_id=identity.user_id, session_id=session_id
        )
    except TOOL_ERRORS as error:
        return refusal_of(error)
    state = services.search_session_state(job=job)
    await db_call(checkpoint_shown, job=job)
    summary = f"Literature search {state['session_id']}: {state['status']}"
    if state["current_checkpoint"]:
        summary += (
            f", waiting at the {state['current_checkpoint_kind']} checkpoint ({state['current_checkpoint']})"
        )
    return answer(structured=state, summary=summary + ".")


@tool(
    name="export_results",
    title="Export a literature search's papers",
    description=(
        "The papers of a complete literature search as markdown (default), json, or bibtex. Only "
        "for a search whose final selection was approved."
    ),
    scopes=[SCOPE_READ],
)
async def export_results(
    session_id: SessionId,
    ctx: Context,
    format: Literal["json", "bibtex", "markdown"] = "markdown",  # the specification names it so
) -> Annotated[CallToolResult, ExportAnswer]:
    identity = identity_from_context(ctx)
    try:
        result = await db_call(
            services.search_result,
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            session_id=session_id,
        )
        content = export_render(result=result, fmt=format)
    except TOOL_ERRORS as error:
        return refusal_of(error)
    structured = ExportAnswer(session_id=str(session_id), format=format, content=content)
    # The export itself first: a text-only client's model reads it as it is.
    return answer(structured=structured.model_dump(mode="json"), summary=content)


@tool(
    name="cancel_session",
    title="Cancel a literature search",
    description=(
        "Cancel a running or waiting literature search: nothing of it runs again and no decision is "
        "accepted. Returns its state, as get_session."
    ),
    scopes=[SCOPE_WRITE],
    read_only=False,
)
async def cancel_session(session_id: SessionId, ctx: Context) -> Annotated[CallToolResult, SessionState]:
    identity = identity_from_context(ctx)
    try:
        job = await db_call(
            services.search_cancel,
            tenant_id=identity.tenant_id,
            user_id=identity.user_id,
            session_id=session_id,
        )
    except TOOL_ERRORS as error:
        return refusal_of(error)
    state = services.search_session_state(job=job)
    return answer(structured=state, summary=f"Literature search {state['session_id']} is cancelled.")


TOOLS = (search_papers, decide, get_session, export_results, cancel_session)

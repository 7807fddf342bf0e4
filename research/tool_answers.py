"""What the research tools answer: their output schemas, and the one shape of their refusals.

A refusal the paper-search specification lists (unknown session, no pending checkpoint, already
complete, invalid action, export of an incomplete job, a failed workflow, invalid data) is a tool
result with ``isError: true``, not a JSON-RPC error: the model reads it and acts on it (calls
get_session, fixes its data). Its shape is always::

    structuredContent: {"error": {"code": -32002, "reason": "unknown_session", "message": "..."}}
    content: [the message, the same JSON as text]

``code`` is the JSON-RPC code the same failure has elsewhere (-32002 not found, -32602 invalid),
``reason`` a stable name from ``jobs.errors`` (``invalid_data`` when the kind's own validation
refused ``data`` or an argument). Another person's or tenant's session reads exactly like a missing
one. Arguments the input schema refuses never reach a tool and stay -32602 JSON-RPC errors, as for
every tool; so do refusals of the caller (scope, rate limit) and outages.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from core.errors import GatehouseError, InvalidInput, NotFound
from mcp_gateway.kernel.tool_results import tool_result

INVALID_DATA = "invalid_data"
WORKFLOW_FAILED = "workflow_failed"
# The refusals that are the caller's to act on; anything else is a JSON-RPC error.
TOOL_ERRORS: tuple[type[GatehouseError], ...] = (NotFound, InvalidInput)


class CheckpointView(BaseModel):
    """The pending checkpoint: its kind and summary, then its payload (candidates, papers, plan)."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(description="The checkpoint's name (like screening-1): decide's checkpoint argument.")
    kind: str = Field(description="plan, screening or final.")
    summary: str


class ResultView(BaseModel):
    paper_count: int
    summary: str


class NextState(BaseModel):
    """What search_papers and decide answer: exactly one of checkpoint, result or status."""

    session_id: str
    iteration: int
    checkpoint: CheckpointView | None = Field(
        default=None, description="The decision the job waits for (decide answers it)."
    )
    result: ResultView | None = Field(default=None, description="Set once the job is complete.")
    status: str | None = Field(
        default=None,
        description="running (still working when the wait ended: call get_session later) or cancelled.",
    )
    message: str | None = None


class SessionState(BaseModel):
    session_id: str
    query: str
    status: str = Field(description="running, waiting, complete, failed or cancelled.")
    is_complete: bool
    has_pending_checkpoint: bool
    current_checkpoint_kind: str | None
    current_checkpoint: str | None = Field(description="The pending checkpoint's name, for decide.")
    checkpoint: CheckpointView | None = Field(description="The pending checkpoint in full, while waiting.")
    iteration: int
    progress: int = Field(description="Steps finished so far; it only grows.")
    message: str
    error: str | None


class ExportAnswer(BaseModel):
    session_id: str
    format: str
    content: str


class ToolErrorDetail(BaseModel):
    code: int
    reason: str
    message: str


class ToolErrorAnswer(BaseModel):
    """The structured content of every refusal (``isError: true``)."""

    error: ToolErrorDetail


def answer(*, structured: dict[str, Any], summary: str) -> CallToolResult:
    """``structured`` (a ``research.services`` shape, which the output schema describes) as the result."""
    return tool_result(structured=structured, summary=[summary])


def next_state_answer(*, state: dict[str, Any]) -> CallToolResult:
    """What search_papers and decide answer for ``research.services.search_next_state``'s ``state``
    (a 2026-07-28 task's completed result too)."""
    if "checkpoint" in state:
        checkpoint = state["checkpoint"]
        summary = (
            f"Waiting for your decision at the {checkpoint['kind']} checkpoint: {checkpoint['summary']} "
            f"Call decide with session_id {state['session_id']} (approve, edit or reject)."
        )
    elif "result" in state:
        summary = f"Complete: {state['result']['summary']} export_results gives the papers."
    elif state.get("status") == "running":
        summary = f"Still working ({state.get('message') or 'running'}); call get_session to follow it."
    else:
        summary = f"The job is {state.get('status')}: {state.get('message') or ''}".strip()
    return answer(structured=state, summary=summary)


def refusal(*, code: int, reason: str, message: str) -> CallToolResult:
    """A refusal as a tool result (``isError``): the message, then the structured error as JSON."""
    structured = ToolErrorAnswer(error=ToolErrorDetail(code=code, reason=reason, message=message))
    payload = structured.model_dump(mode="json")
    return CallToolResult(
        content=[
            TextContent(type="text", text=message),
            TextContent(type="text", text=json.dumps(payload, ensure_ascii=False)),
        ],
        structured_content=payload,
        is_error=True,
    )


def refusal_of(error: GatehouseError) -> CallToolResult:
    data: dict[str, Any] = error.data or {}
    reason = data.get("reason")
    if not isinstance(reason, str):
        reason = "unknown_session" if isinstance(error, NotFound) else INVALID_DATA
    return refusal(code=error.jsonrpc_code, reason=reason, message=error.message)

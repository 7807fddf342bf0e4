"""The tasks extension's wire (``io.modelcontextprotocol/tasks``, SEP-2663, protocol 2026-07-28):
what a ``ToolTask`` looks like as a ``CreateTaskResult`` and as ``tasks/get``'s ``DetailedTask``,
how a request says it speaks the extension, and the screening of what a client hands the runner.

Kept apart from the middleware (``task_extension``) so the shapes can be checked without a server.
The shapes are flat: ``CreateTaskResult`` is ``Result & Task`` (``resultType: "task"`` beside
``taskId``, ``status``, ``createdAt``, ``lastUpdatedAt``, ``ttlMs``), never a nested ``task``; only
``tasks/get`` inlines ``result`` (completed), ``error`` (failed) or ``inputRequests``
(input_required). Neither carries ``requestState`` nor the v1 names ``ttl``/``pollInterval``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcp_types.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY

from core.text_safety import text_unstorable_reason
from mcp_gateway.kernel.tool_tasks_2026_07_28 import TASKS_EXTENSION, ToolTask

CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
# The v1 key a completed task's result must not carry: the task id is at the root of tasks/get.
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"

# A task id is the runner's (a UUID today); anything longer or with control characters is not one.
TASK_ID_MAX_CHARS = 200
# One tasks/update answers the requests of one task: a handful, never thousands.
INPUT_RESPONSES_MAX = 64

UNKNOWN_TASK = "Unknown task: no task of yours has that id."
EXTENSION_NOT_DECLARED = (
    f"This request needs the {TASKS_EXTENSION} extension: declare it in "
    f"_meta[{CLIENT_CAPABILITIES_META_KEY!r}].extensions."
)
TASK_REQUIRED = "Tool {name} runs only as a task: declare the " + TASKS_EXTENSION + " extension to call it."


def missing_extension_error_data() -> dict[str, Any]:
    """``error.data`` of -32021: the capabilities the client must declare, shaped like its own."""
    return {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


MISSING_EXTENSION_CODE = MISSING_REQUIRED_CLIENT_CAPABILITY
UNKNOWN_TASK_CODE = INVALID_PARAMS


def request_declares_tasks(params: Any) -> bool:
    """Whether this request's ``_meta`` client capabilities list the tasks extension. On 2026-07-28
    there is no session: every request says what its client speaks, so the opt-in is per request."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def client_capabilities_of(params: Any) -> dict[str, Any]:
    meta = params.get("_meta") if isinstance(params, dict) else None
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    return dict(capabilities) if isinstance(capabilities, dict) else {}


def task_id_screened(value: Any) -> str | None:
    """The task id if it could be one of ours, else None (answered as an unknown task, so a
    malformed id, a huge one or one with NUL bytes never reaches the database)."""
    if not isinstance(value, str) or not value or len(value) > TASK_ID_MAX_CHARS:
        return None
    if not value.isprintable() or text_unstorable_reason(value) is not None:
        return None
    return value


def input_responses_problem(value: Any) -> str | None:
    """Why ``inputResponses`` cannot be handed to the runner (which stores it), else None."""
    if not isinstance(value, dict):
        return "inputResponses must be an object keyed by the ids of the task's input requests"
    if len(value) > INPUT_RESPONSES_MAX:
        return f"inputResponses has more than {INPUT_RESPONSES_MAX} entries"
    reason = text_unstorable_reason(value)
    return f"inputResponses {reason}" if reason is not None else None


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def task_fields(task: ToolTask) -> dict[str, Any]:
    """The ``Task`` fields every answer about a task carries."""
    fields: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": _timestamp(task.created_at),
        "lastUpdatedAt": _timestamp(task.last_updated_at),
        # Null: kept until deleted; a positive integer otherwise (the field is required).
        "ttlMs": int(task.ttl_ms) if task.ttl_ms is not None and task.ttl_ms > 0 else None,
    }
    if task.poll_interval_ms is not None and task.poll_interval_ms > 0:
        fields["pollIntervalMs"] = int(task.poll_interval_ms)
    if task.status_message:
        fields["statusMessage"] = task.status_message
    return fields


def create_task_result(task: ToolTask) -> dict[str, Any]:
    """What ``tools/call`` answers when it started a task: flat, nothing inlined."""
    return {"resultType": "task", **task_fields(task)}


def detailed_task(task: ToolTask) -> dict[str, Any]:
    """What ``tasks/get`` answers: the task, and what its status has to show."""
    wire: dict[str, Any] = {"resultType": "complete", **task_fields(task)}
    if task.status == "completed" and task.result is not None:
        wire["result"] = _without_related_task(task.result)
    elif task.status == "failed":
        wire["error"] = _error_shape(task.error)
    elif task.status == "input_required" and task.input_requests:
        wire["inputRequests"] = dict(task.input_requests)
    return wire


def ack() -> dict[str, Any]:
    """``tasks/update`` and ``tasks/cancel`` answer an empty result: the task shows on tasks/get."""
    return {"resultType": "complete"}


def _without_related_task(result: dict[str, Any]) -> dict[str, Any]:
    result = {key: value for key, value in result.items() if key != "resultType"}
    meta = result.get("_meta")
    if isinstance(meta, dict) and RELATED_TASK_META_KEY in meta:
        rest = {key: value for key, value in meta.items() if key != RELATED_TASK_META_KEY}
        if rest:
            result["_meta"] = rest
        else:
            result.pop("_meta")
    return result


def _error_shape(error: dict[str, Any] | None) -> dict[str, Any]:
    """A JSON-RPC error object whatever the runner stored (a failed task must carry one)."""
    error = error or {}
    code = error.get("code")
    message = error.get("message")
    shaped: dict[str, Any] = {
        "code": code if isinstance(code, int) and not isinstance(code, bool) else -32603,
        "message": message if isinstance(message, str) and message else "The task failed.",
    }
    if "data" in error:
        shaped["data"] = error["data"]
    return shaped

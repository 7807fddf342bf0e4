"""Tool calls that run as tasks: the ``io.modelcontextprotocol/tasks`` extension of protocol
2026-07-28 (SEP-2663), the contract between the endpoint that speaks it and whatever runs them.

On 2026-07-28 the server decides: a tool whose ``ToolSpec.task_support`` is ``optional`` or
``required`` answers a ``tools/call`` from a client that declared the extension with a
``CreateTaskResult`` at once, and the client follows the task with ``tasks/get`` (which inlines the
result, the error, or the input the task waits for), answers with ``tasks/update`` and may stop it
with ``tasks/cancel``. The endpoint (``mcp_gateway``) speaks the wire; a ``ToolTaskRunner`` stores
the tasks per person and tenant and runs them. The runner lives in a higher layer (the job queue),
which registers it when its app is ready, so the endpoint never imports what runs the work. A
toolset may register its own runner for its tools (``research``: the task is the literature job);
a task id is then found by asking each runner in turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from core.identity import Identity

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

TaskSupport = Literal["forbidden", "optional", "required"]
ToolTaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TOOL_TASK_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
# In the request scope of the call a runner makes to run a task's tool (the task's id): that call
# is the task's own work, so the extension's layer serves it as a plain call (no new task, and a
# tool whose task support is ``required`` runs), with every other check of the guard as usual.
TOOL_TASK_SCOPE_KEY = "gatehouse.tool_task"


@dataclass(frozen=True, slots=True)
class ToolTask:
    """One task as ``tasks/get`` shows it (the extension's ``DetailedTask``)."""

    task_id: str
    status: ToolTaskStatus
    created_at: datetime
    last_updated_at: datetime
    # How long the task is kept from its creation, in milliseconds; None: until it is deleted.
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    status_message: str = ""
    # ``completed``: what the tool call answered, a ``CallToolResult`` on the wire (``isError``
    # included: a tool that ran and reported an error is completed, not failed).
    result: dict[str, Any] | None = None
    # ``failed``: the protocol-level error, ``{"code": int, "message": str, "data"?: ...}``.
    error: dict[str, Any] | None = None
    # ``input_required``: the input requests the task waits for (the ``InputRequests`` map).
    input_requests: dict[str, Any] | None = None


class ToolTaskRunner(Protocol):
    """Stores and runs tool tasks. Every method raises ``core.errors`` exceptions: ``NotFound`` for
    a task id that is not the caller's (malformed, unknown, another person's or tenant's)."""

    async def start(
        self,
        *,
        identity: Identity,
        tool: str,
        arguments: dict[str, Any],
        client_capabilities: dict[str, Any],
        ttl_ms: int | None,
    ) -> ToolTask:
        """Create the task and have it run; ``arguments`` are already validated and the guard has
        checked the toolset, scopes and rate limit. Returns at once (status ``working``)."""
        ...

    async def get(self, *, identity: Identity, task_id: str) -> ToolTask: ...

    async def update(self, *, identity: Identity, task_id: str, input_responses: dict[str, Any]) -> None:
        """Answer the input requests of a task that is ``input_required``; it runs on."""
        ...

    async def cancel(self, *, identity: Identity, task_id: str) -> None:
        """Cancel the task; one already finished is left as it is (cancel is idempotent)."""
        ...


_default_runner: ToolTaskRunner | None = None
# The runners a toolset supplies for its own tools (a literature search task is its job).
_tool_runners: dict[str, ToolTaskRunner] = {}


def tool_task_runner_register(*, runner: ToolTaskRunner, tools: frozenset[str] | None = None) -> None:
    """Called by an app from its ``AppConfig.ready``: with ``tools``, the runner of those tools'
    tasks; without, the default runner of every other tool (the job queue's)."""
    global _default_runner
    if tools is None:
        _default_runner = runner
        return
    for name in tools:
        _tool_runners[name] = runner


def tool_task_runner(*, tool: str | None = None) -> ToolTaskRunner | None:
    """The runner of ``tool``'s tasks (the default runner without ``tool``); None where no app runs
    them (the extension is then not offered for it)."""
    if tool is not None and tool in _tool_runners:
        return _tool_runners[tool]
    return _default_runner


def tool_task_runners() -> tuple[ToolTaskRunner, ...]:
    """Every registered runner, each once, the toolsets' own first: ``tasks/get``, ``tasks/update``
    and ``tasks/cancel`` ask each in turn for the task, ``NotFound`` meaning "not one of mine"."""
    runners: list[ToolTaskRunner] = []
    for runner in [*_tool_runners.values(), _default_runner]:
        if runner is not None and all(runner is not seen for seen in runners):
            runners.append(runner)
    return tuple(runners)

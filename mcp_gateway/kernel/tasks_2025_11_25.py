"""MCP tasks (protocol 2025-11-25): what a toolset whose tools start long work offers the endpoint,
so that a client that asks for task execution gets a task id at once and follows the work with
``tasks/get``, ``tasks/result`` and ``tasks/cancel``, while the endpoint knows nothing of what the
work is (a literature search job, later an agent turn).

The SDK defines the task types but serves none of it (``docs/mcp-tasks.md``); ``task_requests``
serves it for every toolset that declares a ``TaskSource`` (``Toolset.tasks``). The source owns
its tasks' storage and their owners: a task of another person or tenant is ``core.errors.NotFound``
there, exactly like one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from core.identity import Identity

# The one protocol revision that has tasks in its core (2026-07-28 moves them to an extension).
TASKS_PROTOCOL_VERSION = "2025-11-25"
# Where a tasks/result answer names its task (the result itself does not).
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

TaskMethod = Literal["tasks/get", "tasks/result", "tasks/cancel"]


@dataclass(frozen=True, slots=True)
class TaskState:
    """One task as ``tasks/get`` and ``tasks/cancel`` show it (the protocol's ``Task``)."""

    task_id: str
    status: TaskStatus
    created_at: datetime
    last_updated_at: datetime
    status_message: str = ""
    # How long the task is kept from its creation, in milliseconds; None: until it is deleted.
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None

    def wire(self) -> dict[str, Any]:
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at.isoformat(),
            "lastUpdatedAt": self.last_updated_at.isoformat(),
            "ttl": self.ttl_ms,
        }
        if self.status_message:
            task["statusMessage"] = self.status_message
        if self.poll_interval_ms is not None:
            task["pollInterval"] = self.poll_interval_ms
        return task


class TaskSource(Protocol):
    """A toolset's tasks. Every method raises ``core.errors`` exceptions: ``NotFound`` for a task
    id that is not the caller's (malformed, unknown, another person's or tenant's)."""

    @property
    def tools(self) -> frozenset[str]:
        """The toolset's tools a client may call as tasks (``execution.taskSupport: optional``)."""
        ...

    def scopes_for(self, *, method: TaskMethod) -> frozenset[str]:
        """What a caller needs for ``tasks/get``, ``tasks/result`` or ``tasks/cancel`` on its own task
        (starting one needs the tool's own scopes, which the guard checks)."""
        ...

    async def start(
        self, *, identity: Identity, tool: str, arguments: dict[str, Any], session_id: str
    ) -> TaskState:
        """Start ``tool``'s work for the caller (arguments already validated against its schema)."""
        ...

    async def get(self, *, identity: Identity, task_id: str) -> TaskState: ...

    async def result(self, *, identity: Identity, task_id: str) -> dict[str, Any]:
        """What the tool call would have answered, as a ``CallToolResult`` on the wire."""
        ...

    async def cancel(self, *, identity: Identity, task_id: str) -> TaskState:
        """Cancel the task; one already finished is ``InvalidInput`` (-32602, as the protocol says)."""
        ...

"""Serving MCP tasks (protocol 2025-11-25) for the toolsets that declare a ``TaskSource``.

The SDK (``mcp`` 2.3) has the task types but no task machinery: ``tasks/*`` are not among its spec
methods, it never advertises the ``tasks`` capability, and it sieves every ``tools/call`` result
through ``CallToolResult``, which would strip a ``CreateTaskResult`` to an invalid result
(``docs/mcp-tasks.md`` has the measured details). So:

* ``TaskGate``, an SDK server middleware inside the request guard, answers a task-augmented
  ``tools/call`` with the source's ``CreateTaskResult`` itself (a middleware's own result is not
  sieved), after the guard has checked the toolset, scopes, arguments and rate limit and while
  the audit trail records it as the tool call it is; it adds the ``tasks`` capability to an
  ``initialize`` answer and ``execution.taskSupport`` to the tools that have it, only when the
  negotiated version is 2025-11-25 and the caller's tenant has a toolset with tasks;
* ``tasks/get``, ``tasks/result`` and ``tasks/cancel`` are request handlers on the SDK's low-level
  server (methods outside the spec's surface reach their handler with params validated against
  the handler's model); they refuse every other protocol version as the method not found.

A task belongs to its person, not to the session that started it: any session of that person (on
any worker) may follow it, and nobody else sees it (``NotFound``, -32002).
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequestParams,
    CancelTaskRequestParams,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
)
from mcp_types.jsonrpc import METHOD_NOT_FOUND

from core.errors import InsufficientScope, NotFound
from core.identity import Identity
from mcp_gateway.kernel.identity import identity_from_request
from mcp_gateway.kernel.rbac import missing_scopes
from mcp_gateway.kernel.registry import Registry
from mcp_gateway.kernel.scope_keys import SESSION_KEY
from mcp_gateway.kernel.sdk import server_add_request_handler
from mcp_gateway.kernel.tasks_2025_11_25 import (
    RELATED_TASK_META_KEY,
    TASKS_PROTOCOL_VERSION,
    TaskMethod,
    TaskSource,
    TaskState,
)
from mcp_gateway.kernel.toolset_access import toolsets_enabled_async
from mcp_gateway.pipeline.audit_trail import audit_note

UNKNOWN_TASK = "Unknown task: no task of yours has that id."
NOT_A_TASK_TOOL = "Tool {name} does not run as a task: call it without params.task."
TASKS_NOT_OFFERED = "Method not found: tasks are offered on protocol version 2025-11-25 only."

# What the server declares: task-augmented tools/call and tasks/cancel; not tasks/list (yet).
SERVER_TASKS_CAPABILITY: dict[str, Any] = {"cancel": {}, "requests": {"tools": {"call": {}}}}


def tasks_install(*, server: MCPServer, registry: Registry) -> None:
    """Serve tasks for ``registry``'s task sources on ``server``; after the request guard."""
    server.middleware.append(TaskGate(registry))
    requests = TaskRequests(registry)
    server_add_request_handler(
        server=server, method="tasks/get", params_type=GetTaskRequestParams, handler=requests.get
    )
    server_add_request_handler(
        server=server, method="tasks/result", params_type=GetTaskPayloadRequestParams, handler=requests.result
    )
    server_add_request_handler(
        server=server, method="tasks/cancel", params_type=CancelTaskRequestParams, handler=requests.cancel
    )


async def _sources(registry: Registry, identity: Identity) -> tuple[TaskSource, ...]:
    enabled = await toolsets_enabled_async(tenant_id=identity.tenant_id, registry=registry)
    return registry.task_sources(enabled=enabled)


class TaskGate:
    """SDK server middleware: task-augmented calls, and the capability and tool annotations."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if (
            ctx.method == "tools/call"
            and ctx.protocol_version == TASKS_PROTOCOL_VERSION
            and params.get("task") is not None
        ):
            return await self._create(ctx, params)
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if ctx.method == "initialize" and result.get("protocolVersion") == TASKS_PROTOCOL_VERSION:
            if await _sources(self.registry, identity_from_request(ctx.request)):
                result.setdefault("capabilities", {})["tasks"] = SERVER_TASKS_CAPABILITY
        elif ctx.method == "tools/list" and ctx.protocol_version == TASKS_PROTOCOL_VERSION:
            for entry in result.get("tools", []):
                if self.registry.task_source(str(entry.get("name"))) is not None:
                    entry["execution"] = {"taskSupport": "optional"}
        return result

    async def _create(self, ctx: ServerRequestContext[Any, Any], params: dict[str, Any]) -> dict[str, Any]:
        # The SDK validates params after the middleware: this path has to do it itself.
        call = CallToolRequestParams.model_validate(params, by_name=False)
        source = self.registry.task_source(call.name)
        if source is None:
            # The protocol's answer to task execution of a tool that does not declare it.
            raise MCPError(code=METHOD_NOT_FOUND, message=NOT_A_TASK_TOOL.format(name=call.name[:80]))
        session = getattr(ctx.request, "scope", {}).get(SESSION_KEY)
        state = await source.start(
            identity=identity_from_request(ctx.request),
            tool=call.name,
            arguments=dict(call.arguments or {}),
            session_id=session.id if session is not None else "",
        )
        audit_note(task_id=state.task_id)
        return {"task": state.wire()}


class TaskRequests:
    """``tasks/get``, ``tasks/result`` and ``tasks/cancel`` across the caller's task sources."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def get(self, ctx: ServerRequestContext[Any, Any], params: GetTaskRequestParams) -> dict[str, Any]:
        _, _, state = await self._find(ctx, params.task_id, "tasks/get")
        return state.wire()

    async def result(
        self, ctx: ServerRequestContext[Any, Any], params: GetTaskPayloadRequestParams
    ) -> dict[str, Any]:
        identity, source, _ = await self._find(ctx, params.task_id, "tasks/result")
        payload = dict(await source.result(identity=identity, task_id=params.task_id))
        meta = dict(payload.get("_meta") or {})
        meta[RELATED_TASK_META_KEY] = {"taskId": params.task_id}
        payload["_meta"] = meta
        return payload

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: CancelTaskRequestParams
    ) -> dict[str, Any]:
        identity, source, _ = await self._find(ctx, params.task_id, "tasks/cancel")
        state = await source.cancel(identity=identity, task_id=params.task_id)
        return state.wire()

    async def _find(
        self, ctx: ServerRequestContext[Any, Any], task_id: str, method: TaskMethod
    ) -> tuple[Identity, TaskSource, TaskState]:
        """The caller, the source that has the task (its scopes checked) and the task as it stands."""
        if ctx.protocol_version != TASKS_PROTOCOL_VERSION:
            raise MCPError(code=METHOD_NOT_FOUND, message=TASKS_NOT_OFFERED, data=method)
        identity = identity_from_request(ctx.request)
        for source in await _sources(self.registry, identity):
            try:
                state = await source.get(identity=identity, task_id=task_id)
            except NotFound:
                continue
            required = source.scopes_for(method=method)
            missing = missing_scopes(required=required, granted=identity.scopes)
            if missing:
                raise InsufficientScope(required=required, missing=missing)
            return identity, source, state
        raise NotFound(UNKNOWN_TASK, data={"reason": "unknown_task"})

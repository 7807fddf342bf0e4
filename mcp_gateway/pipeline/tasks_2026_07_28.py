"""The tasks extension of protocol 2026-07-28 (``io.modelcontextprotocol/tasks``, SEP-2663), for
every toolset: the endpoint's half of ``mcp_gateway.kernel.tool_tasks_2026_07_28`` (the runner is the other).

``TaskExtensionGate`` is an SDK server middleware placed inside the request guard and the audit
trail, so a ``tools/call`` it answers with a task has passed the guard (toolset on for the tenant,
the tool's scopes, arguments against its schema, the rate limit) and is audited as the tool call it
is. It answers without ``call_next`` where the SDK would get in the way: the SDK has no tasks
machinery, sieves ``tools/call`` answers, and has no handler for ``tasks/update`` (a middleware's
own result is trusted as it is; ``docs/mcp-tasks.md``). Only on 2026-07-28:

* ``server/discover`` lists the extension under ``capabilities.extensions`` and ``tools/list``
  gives each task-supporting tool ``execution.taskSupport``, when a runner is registered and the
  caller's tenant has such a tool on;
* ``tools/call`` of a tool whose ``task_support`` is ``optional`` or ``required``, from a request
  whose ``_meta`` client capabilities declare the extension, starts the task and answers the flat
  ``CreateTaskResult``; without the declaration an optional tool runs as a plain call and a
  required one is refused with -32021. A tool may instead gather input first (MRTR) and continue
  as a task on the final round: it registers with ``task_escalation_register`` and calls
  ``tool_task_escalate`` once it has what it needs;
* ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` are served here where the extension is
  offered (else -32601), checking ``Mcp-Name`` against ``taskId`` (-32020); a request that does
  not declare the extension: -32021; an id that is not one of the caller's tasks: -32602.
  ``tasks/result`` and ``tasks/list``, which the extension removed, are -32601.

On older versions nothing changes: 2025-11-25's tasks are ``task_requests``'s.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.jsonrpc import HEADER_MISMATCH, METHOD_NOT_FOUND

from accounts.scopes import SCOPE_READ
from core.asgi_http import request_header
from core.errors import InsufficientScope, InvalidInput, NotFound
from core.identity import Identity
from core.text_safety import text_unstorable_reason
from mcp_gateway.kernel.identity import identity_from_context, identity_from_request
from mcp_gateway.kernel.rbac import missing_scopes
from mcp_gateway.kernel.registry import Registry
from mcp_gateway.kernel.sdk import server_lowlevel
from mcp_gateway.kernel.task_wire_2026_07_28 import (
    EXTENSION_NOT_DECLARED,
    MISSING_EXTENSION_CODE,
    TASK_REQUIRED,
    UNKNOWN_TASK,
    UNKNOWN_TASK_CODE,
    ack,
    client_capabilities_of,
    create_task_result,
    detailed_task,
    input_responses_problem,
    missing_extension_error_data,
    request_declares_tasks,
    task_id_screened,
)
from mcp_gateway.kernel.tool_tasks_2026_07_28 import (
    TASKS_EXTENSION,
    TOOL_TASK_SCOPE_KEY,
    ToolTask,
    ToolTaskRunner,
    tool_task_runner,
    tool_task_runners,
)
from mcp_gateway.kernel.toolset_access import toolsets_enabled_async
from mcp_gateway.pipeline.audit_trail import audit_note

EXTENSION_VERSION = "2026-07-28"
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
# Methods of the v1 tasks surface the extension removed (the result is inlined on tasks/get).
REMOVED_METHODS = frozenset({"tasks/result", "tasks/list"})
NOT_OFFERED = "Method not found: tasks are not offered to this tenant."
REMOVED = "Method not found: {method} is not part of the tasks extension (tasks/get inlines the result)."
NAME_MISMATCH = "mcp-name header does not match the request body's 'taskId' parameter"
# What following one's own tasks needs: a task is its person's, whatever tool it runs.
TASK_SCOPES = frozenset({SCOPE_READ})
_MCP_NAME = b"mcp-name"


@dataclass
class _Escalation:
    """A self-escalating tool's call in progress: what ``tool_task_escalate`` needs, and its task."""

    tool: str
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    task: ToolTask | None = None


_escalating_tools: set[str] = set()
# Shared by reference, so a handler running in a copy of the context still fills in the task.
_escalation: contextvars.ContextVar[_Escalation | None] = contextvars.ContextVar(
    "gatehouse_task_escalation", default=None
)


def task_escalation_register(*, tool: str) -> None:
    """``tool`` decides itself when it becomes a task: its calls run as plain calls (so it can ask
    for input between calls) until it calls ``tool_task_escalate``."""
    _escalating_tools.add(tool)


async def tool_task_escalate(ctx: Context, *, arguments: dict[str, Any]) -> bool:
    """Continue the call in progress as a task of the same tool, run with ``arguments``; the call
    then answers the ``CreateTaskResult``. False where it cannot (no runner, a client that does not
    speak the extension, another protocol version): the tool then carries on in the call."""
    escalation = _escalation.get()
    runner = tool_task_runner(tool=escalation.tool) if escalation is not None else None
    if escalation is None or runner is None:
        return False
    escalation.task = await _start(
        runner,
        identity=identity_from_context(ctx),
        tool=escalation.tool,
        arguments=arguments,
        client_capabilities=escalation.client_capabilities,
    )
    return True


def task_extension_install(*, server: MCPServer, registry: Registry) -> None:
    """Serve the tasks extension on ``server``; after the request guard (and 2025-11-25's tasks)."""
    server.middleware.append(TaskExtensionGate(registry, server))


class TaskExtensionGate:
    """SDK server middleware: the tasks extension on 2026-07-28 requests."""

    def __init__(self, registry: Registry, server: MCPServer) -> None:
        self.registry = registry
        self.server = server

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.protocol_version != EXTENSION_VERSION:
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method in TASK_METHODS:
            return self._stamped(await self._task_method(ctx, params))
        if ctx.method in REMOVED_METHODS:
            raise MCPError(code=METHOD_NOT_FOUND, message=REMOVED.format(method=ctx.method), data=ctx.method)
        if ctx.method == "tools/call":
            return await self._call(ctx, params, call_next)
        result = await call_next(ctx)
        if (
            isinstance(result, dict)
            and ctx.method in {"server/discover", "tools/list"}
            and await self._offered(identity_from_request(ctx.request))
        ):
            self._advertise(ctx.method, result)
        return result

    # --- advertising ---------------------------------------------------------------------------

    async def _offered(self, identity: Identity) -> bool:
        return await tasks_offered(identity=identity, registry=self.registry)

    def _advertise(self, method: str, result: dict[str, Any]) -> None:
        if method == "server/discover":
            capabilities = result.setdefault("capabilities", {})
            capabilities.setdefault("extensions", {})[TASKS_EXTENSION] = {}
            return
        for entry in result.get("tools", []):
            spec = self.registry.get(str(entry.get("name")))
            if spec is not None and spec.task_support != "forbidden":
                entry["execution"] = {"taskSupport": spec.task_support}

    # --- tools/call ----------------------------------------------------------------------------

    async def _call(
        self, ctx: ServerRequestContext[Any, Any], params: dict[str, Any], call_next: CallNext
    ) -> HandlerResult:
        spec = self.registry.get(str(params.get("name", "")))
        runner = tool_task_runner(tool=spec.name) if spec is not None else None
        scope = getattr(ctx.request, "scope", {})
        if spec is None or spec.task_support == "forbidden" or runner is None or TOOL_TASK_SCOPE_KEY in scope:
            # A legacy ``task`` hint never makes a task of a tool that has none; the runner's own
            # call of a task's tool is the task's work, served as the plain call it is.
            return await call_next(ctx)
        if not request_declares_tasks(params):
            if spec.task_support == "required":
                raise MCPError(
                    code=MISSING_EXTENSION_CODE,
                    message=TASK_REQUIRED.format(name=spec.name),
                    data=missing_extension_error_data(),
                )
            return await call_next(ctx)
        if scope.get("type") != "http":
            # Only a client's HTTP request starts a task: a tool run in-process (stdio) runs as the
            # plain call it is.
            return await call_next(ctx)
        if spec.name in _escalating_tools:
            return await self._escalating(ctx, params, call_next, tool=spec.name)
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise InvalidInput("arguments must be an object")
        reason = text_unstorable_reason(arguments)
        if reason is not None:
            # The task's arguments are stored; the guard let the call through as a plain call would.
            raise InvalidInput(f"Invalid arguments for {spec.name}: the arguments {reason}")
        task = await _start(
            runner,
            identity=identity_from_request(ctx.request),
            tool=spec.name,
            arguments=arguments,
            client_capabilities=client_capabilities_of(params),
        )
        return self._stamped(create_task_result(task))

    async def _escalating(
        self, ctx: ServerRequestContext[Any, Any], params: dict[str, Any], call_next: CallNext, *, tool: str
    ) -> HandlerResult:
        escalation = _Escalation(tool=tool, client_capabilities=client_capabilities_of(params))
        token = _escalation.set(escalation)
        try:
            result = await call_next(ctx)
        finally:
            _escalation.reset(token)
        if escalation.task is None:
            return result
        return self._stamped(create_task_result(escalation.task))

    # --- tasks/get, tasks/update, tasks/cancel -------------------------------------------------

    async def _task_method(
        self, ctx: ServerRequestContext[Any, Any], params: dict[str, Any]
    ) -> dict[str, Any]:
        task_id = params.get("taskId")
        identity = identity_from_request(ctx.request)
        if not await self._offered(identity):
            raise MCPError(code=METHOD_NOT_FOUND, message=NOT_OFFERED, data=ctx.method)
        _check_name_header(ctx, task_id)
        if not request_declares_tasks(params):
            raise MCPError(
                code=MISSING_EXTENSION_CODE,
                message=EXTENSION_NOT_DECLARED,
                data=missing_extension_error_data(),
            )
        missing = missing_scopes(required=TASK_SCOPES, granted=identity.scopes)
        if missing:
            raise InsufficientScope(required=TASK_SCOPES, missing=missing)
        screened = task_id_screened(task_id)
        if screened is None:
            raise _unknown_task()
        responses = params.get("inputResponses")
        if ctx.method == "tasks/update":
            problem = input_responses_problem(responses)
            if problem is not None:
                raise InvalidInput(problem)
        try:
            runner, task = await _task_owner(identity=identity, task_id=screened)
            if ctx.method == "tasks/get":
                return detailed_task(task)
            if ctx.method == "tasks/update":
                assert isinstance(responses, dict)
                await runner.update(identity=identity, task_id=screened, input_responses=responses)
                return ack()
            await runner.cancel(identity=identity, task_id=screened)
            return ack()
        except NotFound:
            raise _unknown_task() from None

    def _stamped(self, result: dict[str, Any]) -> dict[str, Any]:
        """The ``serverInfo`` stamp the SDK puts on every 2026-07-28 result it shapes itself."""
        meta = result.get("_meta")
        stamp = server_lowlevel(server=self.server).server_info_stamp
        result["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_META_KEY: stamp}
        return result


async def _start(
    runner: ToolTaskRunner,
    *,
    identity: Identity,
    tool: str,
    arguments: dict[str, Any],
    client_capabilities: dict[str, Any],
) -> ToolTask:
    # The server decides how long a task is kept; a v1 ``task.ttl`` hint is not the client's to set.
    task = await runner.start(
        identity=identity,
        tool=tool,
        arguments=arguments,
        client_capabilities=client_capabilities,
        ttl_ms=None,
    )
    audit_note(task_id=task.task_id)
    return task


async def tasks_offered(*, identity: Identity, registry: Registry) -> bool:
    """Whether the extension is offered to this caller: a runner, and a tool of theirs to run."""
    if not tool_task_runners():
        return False
    enabled = await toolsets_enabled_async(tenant_id=identity.tenant_id, registry=registry)
    return any(
        spec.task_support != "forbidden" and tool_task_runner(tool=spec.name) is not None
        for toolset in registry.toolsets
        if toolset.name in enabled
        for spec in toolset.tools
    )


async def _task_owner(*, identity: Identity, task_id: str) -> tuple[ToolTaskRunner, ToolTask]:
    """The runner whose task ``task_id`` is, and the task: each runner is asked in turn (a toolset's
    own first), ``NotFound`` meaning "not one of mine"; ``NotFound`` if none has it."""
    for runner in tool_task_runners():
        try:
            return runner, await runner.get(identity=identity, task_id=task_id)
        except NotFound:
            continue
    raise NotFound(UNKNOWN_TASK)


def _check_name_header(ctx: ServerRequestContext[Any, Any], task_id: Any) -> None:
    """SEP-2663 extends ``Mcp-Name`` to the task methods: it must carry the body's ``taskId``."""
    scope = getattr(ctx.request, "scope", {})
    if scope.get("type") != "http" or not isinstance(task_id, str):
        return
    header = decode_header_value(request_header(scope, _MCP_NAME))
    if header is None or header.strip(" \t") != task_id:
        raise MCPError(code=HEADER_MISMATCH, message=NAME_MISMATCH)


def _unknown_task() -> MCPError:
    return MCPError(code=UNKNOWN_TASK_CODE, message=UNKNOWN_TASK)

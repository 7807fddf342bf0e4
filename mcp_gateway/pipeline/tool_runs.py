"""One way to run a tool from anywhere: through the same server and the same pipeline a client's
``tools/call`` meets (``pipeline.server``): the audit trail, the request-state boundary, the guard
(the tenant's toolsets, the caller's scopes, the arguments, the rate limit), the task gates, then the
SDK's own ``tools/call`` handler (the guarded handler: time limit, error translation). A policy added
to the pipeline therefore applies to every way a tool runs, and no caller repeats a check.

* ``tool_run_within``: a tool run inside another tool's request (a workflow command, later the LLM
  tool loop): the same caller, session and client as the outer call, its back-channel and progress
  too; its audit row says what ran it (``via``).
* ``tool_call_run``: a tool run with no client connected (a tool task's step, in a worker), at
  protocol 2026-07-28 through the SDK's single-exchange driver (``serve_one``), with the caller
  captured when the task started in the request's scope as ``transport.stdio`` puts it there.
  There is no back-channel (2026-07-28 has none): a tool that needs the person's input answers
  ``InputRequiredResult``, which becomes the task's ``input_required``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.runner import serve_one
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INTERNAL_ERROR,
    PROTOCOL_VERSION_META_KEY,
    CallToolResult,
    InputRequiredResult,
)

from core.identity import Identity
from core.request_context import request_context_outside_http
from mcp_gateway.kernel.identity import ScopedRequest, request_for_identity
from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.scope_keys import VIA_KEY
from mcp_gateway.kernel.sdk import server_lowlevel, server_request_run
from mcp_gateway.kernel.tool_tasks_2026_07_28 import TASKS_EXTENSION, TOOL_TASK_SCOPE_KEY
from mcp_gateway.pipeline.server import server_build

TASK_PROTOCOL_VERSION = "2026-07-28"
# How the worker names itself to the tool (``clientInfo``), for logs and the audit trail.
TASK_CLIENT_INFO = {"name": "gatehouse-tool-task", "version": "1"}
TRANSPORT_KIND = "tool-task"
PROGRESS_TOKEN = "tool-task"
# A state the task's tool seals stays in the job's row, never reaching a client, and must outlive the
# person's wait to answer: as long as a task may live.
REQUEST_STATE_TTL_SECONDS = 7 * 24 * 3600.0

ProgressHook = Callable[[str], Awaitable[None]]

_server: MCPServer | None = None


def task_server() -> MCPServer:
    """The worker's one server, built on first use like the endpoint's (``server_build``)."""
    global _server
    if _server is None:
        _server = server_build(
            registry=default_registry(), request_state_ttl_seconds=REQUEST_STATE_TTL_SECONDS
        )
    return _server


@dataclass(frozen=True, slots=True)
class CallAnswer:
    """What the call answered: ``result`` (the wire result, ``resultType`` included) or ``error``
    (a JSON-RPC error object ``{code, message, data?}``)."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class _TaskChannel:
    """The SDK's ``DispatchContext`` for the worker's call: no back-channel; a progress
    notification's message goes to ``on_progress`` (the task's status message)."""

    def __init__(
        self,
        *,
        request: object,
        task_id: str,
        on_progress: ProgressHook | None,
        request_id: str | None = None,
    ) -> None:
        # The audit trail records it as the request's id: the call's row names its task (or the
        # request that ran it, when one did).
        self.request_id = request_id or f"task:{task_id}"
        self.message_metadata: MessageMetadata = ServerMessageMetadata(request_context=request)
        self.transport = TransportContext(kind=TRANSPORT_KIND, can_send_request=False)
        self.cancel_requested = anyio.Event()
        self.can_send_request = False
        self._on_progress = on_progress

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        if method == "notifications/progress" and params is not None:
            message = params.get("message")
            if isinstance(message, str) and message and self._on_progress is not None:
                await self._on_progress(message)
        # Other notifications (log messages) have no client to reach while a task runs.

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if message and self._on_progress is not None:
            await self._on_progress(message)


def task_client_capabilities(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The client's capabilities as the worker's call declares them: without the tasks extension,
    so the call runs the tool instead of starting another task."""
    declared = dict(capabilities)
    extensions = declared.get("extensions")
    if isinstance(extensions, Mapping):
        declared["extensions"] = {k: v for k, v in extensions.items() if k != TASKS_EXTENSION}
    return declared


async def tool_call_run(
    *,
    identity: Identity,
    task_id: str,
    tool: str,
    arguments: Mapping[str, Any],
    client_capabilities: Mapping[str, Any],
    input_responses: Mapping[str, Any] | None = None,
    request_state: str | None = None,
    on_progress: ProgressHook | None = None,
    request_id: str | None = None,
    via: str | None = None,
) -> CallAnswer:
    """Call ``tool`` for ``identity`` through the server, at protocol 2026-07-28. ``request_id``
    and ``via``, when another request runs the tool (the LLM tool loop of a REST call), link its
    audit row to that request and say what ran it."""
    params: dict[str, Any] = {
        "name": tool,
        "arguments": dict(arguments),
        "_meta": {**_meta(task_client_capabilities(client_capabilities)), "progressToken": PROGRESS_TOKEN},
    }
    if input_responses is not None:
        params["inputResponses"] = dict(input_responses)
    if request_state is not None:
        params["requestState"] = request_state
    request = request_for_identity(identity=identity)
    # The extension's layer lets this call through as a plain one, whatever the tool's task support.
    request.scope[TOOL_TASK_SCOPE_KEY] = task_id
    if via is not None:
        request.scope[VIA_KEY] = via
    channel = _TaskChannel(request=request, task_id=task_id, on_progress=on_progress, request_id=request_id)
    try:
        result = await _served(channel, "tools/call", params)
    except Exception as error:
        return CallAnswer(error=_error_object(error))
    return CallAnswer(result=result)


def _meta(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The 2026-07-28 envelope of the worker's (or another request's) own calls."""
    return {
        PROTOCOL_VERSION_META_KEY: TASK_PROTOCOL_VERSION,
        CLIENT_INFO_META_KEY: TASK_CLIENT_INFO,
        CLIENT_CAPABILITIES_META_KEY: dict(capabilities),
    }


async def _served(channel: _TaskChannel, method: str, params: dict[str, Any]) -> Any:
    """``method`` served by the worker's server through the SDK's single-exchange driver, under
    the channel's request id."""
    connection = Connection.from_envelope(
        TASK_PROTOCOL_VERSION, TASK_CLIENT_INFO, params["_meta"][CLIENT_CAPABILITIES_META_KEY]
    )
    with request_context_outside_http(request_id=channel.request_id):
        return await serve_one(
            server_lowlevel(server=task_server()),
            channel,
            method,
            params,
            connection=connection,
            lifespan_state={},
        )


def _error_object(error: BaseException) -> dict[str, Any]:
    """The JSON-RPC error object the call ended with; ``as_mcp_error`` logs the unexpected and
    keeps their internals out of it, as for a client's own call."""
    data = handler_exception_to_error_data(error) if isinstance(error, Exception) else None
    if data is None:
        data = as_mcp_error(error).error
    wire = data.model_dump(mode="json", exclude_none=True)
    wire.setdefault("code", INTERNAL_ERROR)
    return wire


async def tool_run_within(
    *, ctx: Context, name: str, arguments: Mapping[str, Any], via: str
) -> CallToolResult | InputRequiredResult:
    """Run the tool ``name`` inside the request ``ctx`` serves, through the whole pipeline, as the
    same caller on the same session; ``via`` (``workflow:<command>``) goes on its audit row.

    Returns the tool's result (``isError`` for the tool's own failure), or ``InputRequiredResult``;
    raises ``MCPError`` for what the pipeline refused or translated (unknown tool, missing scope,
    invalid arguments, rate limit, time limit)."""
    outer = ctx.request_context
    scope = dict(getattr(outer.request, "scope", None) or {})
    scope[VIA_KEY] = via
    # Only the scope: the outer HTTP request's headers (Mcp-Param-*) belong to the outer call.
    nested = replace(outer, request=ScopedRequest(scope=scope))
    params = {"name": name, "arguments": dict(arguments)}
    return await server_request_run(server=ctx.mcp_server, ctx=nested, method="tools/call", params=params)


async def tools_list_run(*, identity: Identity, request_id: str) -> list[dict[str, Any]]:
    """The tools ``identity`` may call, as ``tools/list`` answers them through the pipeline (the
    tenant's toolsets and upstreams, the caller's scopes): what a client of theirs would see."""
    request = request_for_identity(identity=identity)
    channel = _TaskChannel(request=request, task_id="", on_progress=None, request_id=request_id)
    result = await _served(channel, "tools/list", {"_meta": _meta({})})
    tools = result.get("tools") if isinstance(result, dict) else None
    return [entry for entry in tools or [] if isinstance(entry, dict)]

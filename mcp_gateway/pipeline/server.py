"""The SDK server every MCP request is served by, wherever it comes from (the HTTP endpoint of
either era, stdio, a task's worker, a nested call): the tools of the registry under their guarded
handlers, and the pipeline's middleware around them, outermost first: the audit trail, the SDK's
request-state boundary, the request guard, the task gates."""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    EmptyResult,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    ToolAnnotations,
    UnsubscribeRequestParams,
)

from core.db import db_call
from mcp_gateway.kernel.identity_cache import identity_cache
from mcp_gateway.kernel.registry import Registry
from mcp_gateway.kernel.request_state import REQUEST_STATE_TTL_SECONDS, request_state_security
from mcp_gateway.kernel.scope_keys import SESSION_KEY
from mcp_gateway.kernel.sdk import (
    server_add_request_handler,
    server_announce_list_changes,
    server_drop_telemetry,
)
from mcp_gateway.kernel.sessions import session_set_log_level
from mcp_gateway.pipeline.audit_trail import AuditTrail
from mcp_gateway.pipeline.guard import RequestGuard, guarded_handler
from mcp_gateway.pipeline.list_changes import ListChanges, list_changes_build
from mcp_gateway.pipeline.resource_subscriptions import subscribe, unsubscribe
from mcp_gateway.pipeline.tasks_2025_11_25 import tasks_install
from mcp_gateway.pipeline.tasks_2026_07_28 import task_extension_install

INSTRUCTIONS = (
    "Gatehouse serves the tools your tenant and role allow. Call `whoami` to see which user, "
    "tenant, role and scopes this connection acts with."
)


def server_build(
    *,
    registry: Registry,
    request_state_ttl_seconds: float = REQUEST_STATE_TTL_SECONDS,
    changes: ListChanges | None = None,
) -> MCPServer:
    server: MCPServer = MCPServer(
        name="gatehouse",
        title="Gatehouse",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        request_state_security=request_state_security(ttl_seconds=request_state_ttl_seconds),
    )
    server_drop_telemetry(server=server)
    # The audit trail goes first, before the SDK's requestState boundary: a refused state (tampered,
    # expired, someone else's) is a call worth its audit row too.
    server.middleware.insert(0, AuditTrail(registry))
    server.middleware.append(RequestGuard(registry, server))
    for spec in registry.tools:
        server.add_tool(
            guarded_handler(spec),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=ToolAnnotations(read_only_hint=spec.read_only),
            structured_output=spec.structured,
        )
    for toolset in registry.toolsets:
        if toolset.install is not None:
            toolset.install(server)
    tasks_install(server=server, registry=registry)
    task_extension_install(server=server, registry=registry)
    server_add_request_handler(
        server=server, method="logging/setLevel", params_type=SetLevelRequestParams, handler=_set_log_level
    )
    # The SDK's listen streams, one bus per tenant, fed by changes from any worker; handshake-era
    # sessions hear the same on their standalone GET stream (``standalone_stream``).
    changes = changes or list_changes_build(registry=registry)
    server_add_request_handler(
        server=server,
        method="subscriptions/listen",
        params_type=SubscriptionsListenRequestParams,
        handler=changes.listen,
    )
    server_add_request_handler(
        server=server, method="resources/subscribe", params_type=SubscribeRequestParams, handler=subscribe
    )
    server_add_request_handler(
        server=server,
        method="resources/unsubscribe",
        params_type=UnsubscribeRequestParams,
        handler=unsubscribe,
    )
    server_announce_list_changes(server=server)
    return server


async def _set_log_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    session = getattr(ctx.request, "scope", {}).get(SESSION_KEY)
    if session is not None:
        await db_call(session_set_log_level, session_id=session.id, level=params.level)
        identity_cache.forget(("session", session.id))
    return EmptyResult()

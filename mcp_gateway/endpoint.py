"""The MCP endpoint: the official SDK's server behind Gatehouse's own layers, as an ASGI app.

Both eras' requests go straight to the SDK's kernel: handshake-era ones (sessions in PostgreSQL)
through ``exchange``, 2026-07-28 ones, which stand alone, through ``modern_exchange``; the SDK's
session manager and its transports are not used. Daphne runs no ASGI lifespan, so the one
background job (the purge of idle sessions) is started by the first request, in a task that lives
as long as the event loop.
"""

from __future__ import annotations

import asyncio
import logging
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
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from core.asgi_http import request_header
from core.conf import gatehouse_settings
from core.db import db_call
from mcp_gateway.asgi.auth import McpAuthMiddleware
from mcp_gateway.asgi.envelope import JsonRpcEnvelopeMiddleware
from mcp_gateway.asgi.failsafe import McpFailsafe
from mcp_gateway.asgi.scope_keys import IDENTITY_KEY, SESSION_KEY
from mcp_gateway.asgi.sessions import McpSessionMiddleware
from mcp_gateway.audit_trail import AuditTrail
from mcp_gateway.changes import change_log_purge
from mcp_gateway.exchange import HandshakeEraApp
from mcp_gateway.guard import RequestGuard, guarded_handler
from mcp_gateway.identity_cache import identity_cache
from mcp_gateway.list_changes import ListChanges, list_changes_build
from mcp_gateway.modern_exchange import ModernEraApp
from mcp_gateway.registry import Registry, default_registry
from mcp_gateway.relay import relay_build
from mcp_gateway.request_state import REQUEST_STATE_TTL_SECONDS, request_state_security
from mcp_gateway.resource_subscriptions import subscribe, unsubscribe
from mcp_gateway.sdk import (
    server_add_request_handler,
    server_announce_list_changes,
    server_drop_telemetry,
    server_lowlevel,
)
from mcp_gateway.sessions import session_purge, session_set_log_level
from mcp_gateway.standalone_stream import StandaloneStreams
from mcp_gateway.step_up import challenging_send
from mcp_gateway.task_extension import task_extension_install
from mcp_gateway.task_requests import tasks_install

logger = logging.getLogger(__name__)

VERSION_HEADER = b"mcp-protocol-version"

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


class SessionPurge:
    """The purge of idle sessions, started with the first request of any era."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start_soon(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(_purge_sessions_forever())


async def _purge_sessions_forever() -> None:
    interval = gatehouse_settings.MCP_SESSION_PURGE_INTERVAL_SECONDS
    if not interval:
        await asyncio.Event().wait()
    while True:
        await asyncio.sleep(interval)
        try:
            ended, deleted = await db_call(session_purge)
            await db_call(change_log_purge)
        except Exception:
            # A failed sweep (database away) must not stop the endpoint; the next one retries.
            logger.exception("MCP session purge failed")
        else:
            if ended or deleted:
                logger.info("MCP session purge: %d ended as idle, %d deleted", ended, deleted)


def mcp_app_build() -> McpFailsafe:
    registry = default_registry()
    changes = list_changes_build(registry=registry)
    server = server_lowlevel(server=server_build(registry=registry, changes=changes))
    handshake = McpSessionMiddleware(
        HandshakeEraApp(server=server, relay=relay_build()), streams=StandaloneStreams(changes=changes)
    )
    modern = ModernEraApp(server=server)
    return McpFailsafe(McpAuthMiddleware(JsonRpcEnvelopeMiddleware(EraRouter(handshake, modern))))


class EraRouter:
    """Handshake-era requests (with no version header, as 2024-11-05 clients send them, or a
    handshake version) to the persisted sessions and the exchange; 2026-07-28 (and unknown
    versions, for the SDK's ladder to refuse) to the modern exchange."""

    def __init__(self, handshake: ASGIApp, modern: ASGIApp) -> None:
        self.handshake = handshake
        self.modern = modern
        self.purge = SessionPurge()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.purge.start_soon()
        version = request_header(scope, VERSION_HEADER)
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
            await self.handshake(scope, receive, send)
        else:
            await self.modern(scope, receive, challenging_send(send, identity=scope[IDENTITY_KEY]))

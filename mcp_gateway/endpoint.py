"""The MCP endpoint: the official SDK's server behind Gatehouse's own layers, as an ASGI app.

Handshake-era requests (sessions in PostgreSQL) go straight to the SDK's kernel (``exchange``);
2026-07-28 requests, which stand alone, go to the SDK's session manager. Daphne runs no ASGI
lifespan, so the manager's ``run()`` is entered lazily by the first request, in a background task
that lives as long as the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import EmptyResult, SetLevelRequestParams, SubscriptionsListenRequestParams, ToolAnnotations
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.asgi_http import request_header
from core.conf import gatehouse_settings
from core.db import db_call
from mcp_gateway.asgi.auth import McpAuthMiddleware
from mcp_gateway.asgi.envelope import JsonRpcEnvelopeMiddleware
from mcp_gateway.asgi.failsafe import McpFailsafe
from mcp_gateway.asgi.scope_keys import IDENTITY_KEY, SESSION_KEY
from mcp_gateway.asgi.sessions import McpSessionMiddleware
from mcp_gateway.audit_trail import AuditTrail
from mcp_gateway.exchange import HandshakeEraApp
from mcp_gateway.guard import RequestGuard, guarded_handler
from mcp_gateway.identity_cache import identity_cache
from mcp_gateway.list_changes import list_changes_build
from mcp_gateway.registry import Registry, default_registry
from mcp_gateway.relay import relay_build
from mcp_gateway.request_state import REQUEST_STATE_TTL_SECONDS, request_state_security
from mcp_gateway.sdk import server_add_request_handler, server_drop_telemetry, server_lowlevel
from mcp_gateway.sessions import session_purge, session_set_log_level
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
    *, registry: Registry, request_state_ttl_seconds: float = REQUEST_STATE_TTL_SECONDS
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
    # The SDK's listen streams, one bus per tenant, fed by toolset changes from any worker.
    server_add_request_handler(
        server=server,
        method="subscriptions/listen",
        params_type=SubscriptionsListenRequestParams,
        handler=list_changes_build(registry=registry).listen,
    )
    return server


async def _set_log_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    session = getattr(ctx.request, "scope", {}).get(SESSION_KEY)
    if session is not None:
        await db_call(session_set_log_level, session_id=session.id, level=params.level)
        identity_cache.forget(("session", session.id))
    return EmptyResult()


class McpTransportApp:
    """Owns the session manager and starts it on first use."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start_soon(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _ensure_running(self) -> None:
        if self._ready.is_set():
            return
        self.start_soon()
        assert self._task is not None
        waiter = asyncio.ensure_future(self._ready.wait())
        await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not self._ready.is_set():
            # run() can be entered only once per manager: a failed start is fatal, loudly.
            raise RuntimeError("The MCP session manager failed to start.") from self._task.exception()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._ensure_running()
        await self.manager.handle_request(scope, receive, _flush_sse_headers(send))

    async def _run(self) -> None:
        async with self.manager.run():
            self._ready.set()
            await _purge_sessions_forever()


async def _purge_sessions_forever() -> None:
    interval = gatehouse_settings.MCP_SESSION_PURGE_INTERVAL_SECONDS
    if not interval:
        await asyncio.Event().wait()
    while True:
        await asyncio.sleep(interval)
        try:
            ended, deleted = await db_call(session_purge)
        except Exception:
            # A failed sweep (database away) must not stop the endpoint; the next one retries.
            logger.exception("MCP session purge failed")
        else:
            if ended or deleted:
                logger.info("MCP session purge: %d ended as idle, %d deleted", ended, deleted)


# An SSE comment line: clients ignore it, and it carries no event.
_SSE_OPENING = b": gatehouse\n\n"


def _flush_sse_headers(send: Send) -> Send:
    """Daphne (Twisted) holds response headers until the first body bytes. An SSE stream with
    nothing to say yet (the standalone GET stream) would then look hung to the client until the
    first keep-alive ping, 15 s later; a comment line right after the headers opens it at once."""

    async def wrapped(message: Message) -> None:
        await send(message)
        if message["type"] == "http.response.start" and any(
            name.lower() == b"content-type" and value.startswith(b"text/event-stream")
            for name, value in message.get("headers", [])
        ):
            await send({"type": "http.response.body", "body": _SSE_OPENING, "more_body": True})

    return wrapped


def mcp_app_build() -> McpFailsafe:
    registry = default_registry()
    server = server_build(registry=registry)
    # Only the session manager this creates is used, and only for 2026-07-28 requests, which stand
    # alone; handshake-era sessions live in Postgres and go to the exchange. Channels does the
    # routing. Host and Origin are checked by McpAuthMiddleware against Django's ALLOWED_HOSTS, so
    # the SDK's copy is off.
    server.streamable_http_app(
        json_response=False,
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    modern = McpTransportApp(server.session_manager)
    kernel = HandshakeEraApp(server=server_lowlevel(server=server), relay=relay_build())
    handshake = McpSessionMiddleware(kernel)
    return McpFailsafe(McpAuthMiddleware(JsonRpcEnvelopeMiddleware(EraRouter(handshake, modern))))


class EraRouter:
    """Handshake-era requests (with no version header, as 2024-11-05 clients send them, or a
    handshake version) to the persisted sessions and the exchange; 2026-07-28 (and unknown
    versions, for the SDK to refuse) to the SDK's session manager."""

    def __init__(self, handshake: ASGIApp, modern: McpTransportApp) -> None:
        self.handshake = handshake
        self.modern = modern

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        version = request_header(scope, VERSION_HEADER)
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
            # The purge job lives with the manager; start it with the first request of any era.
            self.modern.start_soon()
            await self.handshake(scope, receive, send)
        else:
            await self.modern(scope, receive, challenging_send(send, identity=scope[IDENTITY_KEY]))

"""The MCP endpoint: the official SDK's server behind Gatehouse's own layers, as an ASGI app.

Both eras' requests go straight to the SDK's kernel: handshake-era ones (sessions in PostgreSQL)
through ``exchange_handshake_era``, 2026-07-28 ones, which stand alone, through
``exchange_2026_07_28``; the SDK's session manager and its transports are not used. Daphne runs
no ASGI lifespan, so the one background job (the purge of idle sessions) is started by the first
request, in a task that lives as long as the event loop.
"""

from __future__ import annotations

import asyncio
import logging

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from core.asgi_http import request_header
from core.conf import gatehouse_settings
from core.db import db_call
from mcp_gateway.kernel.changes import change_log_purge
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.scope_keys import IDENTITY_KEY
from mcp_gateway.kernel.sdk import (
    server_lowlevel,
)
from mcp_gateway.kernel.sessions import session_purge
from mcp_gateway.pipeline.list_changes import list_changes_build
from mcp_gateway.pipeline.server import server_build
from mcp_gateway.transport.auth import McpAuthMiddleware
from mcp_gateway.transport.envelope import JsonRpcEnvelopeMiddleware
from mcp_gateway.transport.exchange_2026_07_28 import ModernEraApp
from mcp_gateway.transport.exchange_handshake_era import HandshakeEraApp
from mcp_gateway.transport.failsafe import McpFailsafe
from mcp_gateway.transport.relay import relay_build
from mcp_gateway.transport.sessions import McpSessionMiddleware
from mcp_gateway.transport.standalone_stream import StandaloneStreams
from mcp_gateway.transport.step_up import challenging_send

logger = logging.getLogger(__name__)

VERSION_HEADER = b"mcp-protocol-version"


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

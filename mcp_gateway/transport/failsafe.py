"""The outermost layer of the MCP endpoint: whatever escapes the layers behind it is answered as
JSON-RPC and audited, never with the server's HTML error page.

Each layer answers the errors it expects in its own words; this one is for the rest (a bug, a
database gone mid-request). The answer is the one error vocabulary's (``jsonrpc_errors``): -32005
for a database that is away, -32603 for anything else, with HTTP 503 or 500 and a JSON-RPC body
whose id is null, since the message may not even have been read. A response that had already
started cannot be replaced, only ended.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.models import AuditAction, AuditOutcome
from mcp_gateway.kernel.jsonrpc_errors import as_gatehouse_error
from mcp_gateway.transport.envelope import jsonrpc_error
from oauth.edge_refusals import edge_audit

logger = logging.getLogger(__name__)


class McpFailsafe:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as error:
            translated = as_gatehouse_error(error)  # logs it, with its traceback
            await edge_audit(
                action=AuditAction.SERVER_ERROR,
                outcome=AuditOutcome.ERROR,
                target=str(scope.get("path", ""))[:200],
                detail={"error": type(error).__name__, "code": translated.jsonrpc_code},
            )
            if started:
                await _end_quietly(send)
                return
            await jsonrpc_error(
                send, status=translated.http_status, code=translated.jsonrpc_code, message=translated.message
            )


async def _end_quietly(send: Send) -> None:
    try:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except Exception:
        logger.warning("Could not end an MCP response after a failure", exc_info=True)

"""ASGI middleware in front of the MCP transport: Host/Origin checks, then bearer authentication.

Each refusal is audited (``refusals.edge_audit``): a foreign Host or Origin as ``request.refused``,
a presented token that is refused as ``token.rejected``. A request with no token at all is not: it
is how every OAuth client starts, by asking for the challenge.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from django.conf import settings
from django.db import DatabaseError
from django.http.request import split_domain_port, validate_host
from starlette.types import ASGIApp, Receive, Scope, Send

from core.asgi_http import request_header, send_json
from core.cors import origin_allowed
from core.db_turns import db_turns_for
from core.errors import AuthenticationFailed
from core.identity import Identity
from core.models import AuditAction
from mcp_gateway.kernel.identity_cache import identity_cache
from mcp_gateway.kernel.scope_keys import IDENTITY_KEY, LIVE_SESSION_KEY
from mcp_gateway.kernel.sessions import LiveSession
from mcp_gateway.transport.bearer import identity_from_bearer
from oauth.challenge import www_authenticate
from oauth.edge_refusals import edge_audit

logger = logging.getLogger(__name__)

TOKEN_MISSING = "A bearer token is required."
TOKEN_MALFORMED = "The Authorization header must be 'Bearer <token>'."
BAD_HOST = "Invalid Host header."
BAD_ORIGIN = "Origin not allowed."
UNAVAILABLE = "The service is temporarily unavailable; retry shortly."


@lru_cache(maxsize=256)
def _host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Django's verdict on a Host header, kept per header and list: clients repeat theirs."""
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


class McpAuthMiddleware:
    """Authenticates every request to the MCP endpoint before the SDK transport sees it.

    The resolved Identity goes into the ASGI scope (read per request by tool handlers, so nothing
    leaks between concurrent requests), with the live session the request names, if any
    (``transport.sessions`` decides what to do with it).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # DNS-rebinding protection with Django's own host rules, so there is one list to maintain.
        host = request_header(scope, b"host") or ""
        if not _host_allowed(host, tuple(settings.ALLOWED_HOSTS)):
            await edge_audit(
                action=AuditAction.REQUEST_REFUSED,
                target="host",
                detail={"reason": BAD_HOST, "host": host[:200]},
            )
            await send_json(send, status=421, body={"error": "invalid_host", "error_description": BAD_HOST})
            return
        # The CORS policy's own answer (core.cors): the origins whose pages may read the answers.
        origin = request_header(scope, b"origin")
        if origin is not None and not origin_allowed(origin):
            await edge_audit(
                action=AuditAction.REQUEST_REFUSED,
                target="origin",
                detail={"reason": BAD_ORIGIN, "origin": origin[:200]},
            )
            await send_json(
                send, status=403, body={"error": "invalid_origin", "error_description": BAD_ORIGIN}
            )
            return
        # Daphne runs no lifespan: the first request starts this worker's change listener.
        identity_cache.start()
        try:
            identity, session = await self._authenticate(scope)
        except DatabaseError:
            logger.exception("Token lookup failed: database unavailable")
            await send_json(
                send,
                status=503,
                body={"error": "temporarily_unavailable", "error_description": UNAVAILABLE},
                headers=[(b"retry-after", b"5")],
            )
            return
        except AuthenticationFailed as exc:
            presented = request_header(scope, b"authorization") is not None
            if presented:
                await edge_audit(
                    action=AuditAction.TOKEN_REJECTED,
                    target="bearer",
                    detail={"reason": exc.message, **(exc.data or {})},
                )
            await send_json(
                send,
                status=exc.http_status,
                body={"error": "invalid_token", "error_description": exc.message},
                headers=[
                    (
                        b"www-authenticate",
                        www_authenticate(
                            error="invalid_token" if presented else None,
                            description=exc.message if presented else None,
                        ).encode(),
                    )
                ],
            )
            return
        with db_turns_for(owner=identity.tenant_id):
            await self.app({**scope, IDENTITY_KEY: identity, LIVE_SESSION_KEY: session}, receive, send)

    @staticmethod
    async def _authenticate(scope: Scope) -> tuple[Identity, LiveSession | None]:
        header = request_header(scope, b"authorization")
        if header is None:
            raise AuthenticationFailed(TOKEN_MISSING)
        scheme, _, raw_token = header.partition(" ")
        raw_token = raw_token.strip()
        if scheme.lower() != "bearer" or not raw_token or " " in raw_token:
            raise AuthenticationFailed(TOKEN_MALFORMED)
        return await identity_from_bearer(
            raw_token=raw_token, session_id=request_header(scope, b"mcp-session-id")
        )

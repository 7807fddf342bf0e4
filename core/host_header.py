"""One Host header per request, refused at the outermost layer otherwise.

A request with two Host headers is ambiguous: the layers behind (Django's ``get_host``, the MCP
endpoint's DNS-rebinding check, a proxy in front) need not agree on which one counts, and that
disagreement is what Host-confusion attacks exploit. So the request is refused before anything
reads either: HTTP 400 in the shape of the endpoint it was for (JSON-RPC at the MCP path, the
OAuth error object under ``/oauth/`` and ``/.well-known/``, plain text elsewhere), and an audit
row (``request.refused``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from starlette.types import ASGIApp, Receive, Scope, Send

from core.asgi_http import send_json
from core.audit.refusals import audit_refusal_record_async
from core.audit.trail import audit_entry
from core.models import AuditAction, AuditOutcome

logger = logging.getLogger(__name__)

DUPLICATE_HOST = "Bad Request: the request has more than one Host header."


class SingleHostMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = [value for name, value in scope.get("headers", []) if name == b"host"]
        if len(hosts) <= 1:
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        await _refusal_audit(path=path, hosts=[host.decode("latin-1")[:200] for host in hosts[:4]])
        await _refuse(send, path=path)


async def _refusal_audit(*, path: str, hosts: list[str]) -> None:
    entry = audit_entry(
        action=AuditAction.REQUEST_REFUSED,
        outcome=AuditOutcome.DENIED,
        target="host",
        detail={"reason": DUPLICATE_HOST, "hosts": hosts, "path": path[:200]},
    )
    try:
        await audit_refusal_record_async(entry, key="duplicate-host")
    except Exception:
        logger.exception("Audit row for a request with two Host headers not written")


async def _refuse(send: Send, *, path: str) -> None:
    if path.rstrip("/") == settings.MCP_PATH:
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": DUPLICATE_HOST}}
        await send_json(send, status=400, body=body)
    elif path.startswith(("/oauth/", "/.well-known/")):
        await send_json(
            send, status=400, body={"error": "invalid_request", "error_description": DUPLICATE_HOST}
        )
    else:
        payload = DUPLICATE_HOST.encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(payload)).encode()),
        ]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

"""Who asked, per HTTP request: a request id and the client's address, for logs and the audit trail.

``RequestContextMiddleware`` wraps the whole ASGI application (Django pages and the MCP endpoint
alike). It takes the client's ``X-Request-Id`` when it is a sane token, makes one otherwise,
returns it on every response, and keeps both values in context variables: asgiref copies the
context into the threads that run Django views, so services read them without being handed a
request.

It also writes the access log: one INFO line per request on the ``gatehouse.access`` logger
(method, path without its query string, which may carry OAuth codes, status, duration, request
id, client address), unless ``ACCESS_LOG`` is off.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import logging
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.asgi_http import request_header
from core.conf import gatehouse_settings

REQUEST_ID_HEADER = b"x-request-id"
access_logger = logging.getLogger("gatehouse.access")
# Visible ASCII without spaces or separators that could break a log line or a header.
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: str
    ip: str | None


_current: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "gatehouse_request_context", default=None
)


def request_context() -> RequestContext | None:
    """The HTTP request being served, or None outside one (commands, background sweeps)."""
    return _current.get()


def current_request_id() -> str:
    ctx = _current.get()
    return ctx.request_id if ctx else ""


@contextlib.contextmanager
def request_context_outside_http(*, request_id: str) -> Iterator[RequestContext]:
    """Serve work that stands for a request but arrived by no HTTP request (a tool task's call in a
    jobs worker) under ``request_id``, so its log lines and audit rows carry it."""
    context = RequestContext(request_id=request_id[:128], ip=None)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def request_id_new() -> str:
    # 32 hex digits, as a uuid4's were, without building a UUID on every request.
    return secrets.token_hex(16)


def client_ip(*, peer: str | None, forwarded_for: str | None) -> str | None:
    """The client's address: the peer, unless trusted proxies put it in X-Forwarded-For.

    Only the entries the trusted proxies appended (counted from the right) are believed; anything
    further left was written by the client and could be anything.
    """
    hops = gatehouse_settings.TRUSTED_PROXY_COUNT
    candidate = peer
    if hops and forwarded_for:
        entries = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
        if len(entries) >= hops:
            candidate = entries[-hops]
    if candidate is None:
        return None
    return _address_text(candidate)


@lru_cache(maxsize=1024)
def _address_text(candidate: str) -> str | None:
    """An address in its canonical text, or None; kept per text, as a client's address repeats."""
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return None


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = request_header(scope, REQUEST_ID_HEADER)
        request_id = offered if offered and _SANE_REQUEST_ID.match(offered) else request_id_new()
        peer = scope.get("client")
        ip = client_ip(
            peer=peer[0] if peer else None, forwarded_for=request_header(scope, b"x-forwarded-for")
        )
        token = _current.set(RequestContext(request_id=request_id, ip=ip))
        encoded = request_id.encode()
        started = time.perf_counter()
        status: int | None = None

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != REQUEST_ID_HEADER]
                message = {**message, "headers": [*headers, (REQUEST_ID_HEADER, encoded)]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # The server answers 500 for an application that raised before responding.
            status = status or 500
            raise
        finally:
            if gatehouse_settings.ACCESS_LOG and access_logger.isEnabledFor(logging.INFO):
                _access_log(scope, status=status, started=started, ip=ip)
            _current.reset(token)


def _access_log(scope: Scope, *, status: int | None, started: float, ip: str | None) -> None:
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    method = scope.get("method", "")
    # scope["path"] never holds the query string, where authorization codes and states travel.
    path = scope.get("path", "")
    # Status None: the client went away before any response started.
    access_logger.info(
        "%s %s %s %sms",
        method,
        path,
        status if status is not None else "-",
        duration_ms,
        extra={"method": method, "path": path, "status": status, "duration_ms": duration_ms, "ip": ip},
    )

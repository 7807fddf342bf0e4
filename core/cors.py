"""Browser clients on other origins (the MCP Inspector, a web app): one CORS policy, django-cors-headers'.

The library decides, from the ``CORS_*`` settings (config/settings.py): which origins
(``CORS_ALLOWED_ORIGINS``: ``PUBLIC_URL`` and ``MCP_ALLOWED_ORIGINS``), on which paths
(``CORS_URLS_REGEX``: ``/mcp``, the REST API, discovery, registration, token, revocation; never the login,
consent or admin pages, which a browser navigates to rather than fetches), which request headers a
preflight allows and which response headers a page may read. Two rules more, through the
library's own extension point (its ``check_request_enabled`` signal, connected in ``core.apps``):

- **Public documents** (``PUBLIC_DOCUMENT_URLS_REGEX``, everything under ``/.well-known/``) may be
  read from any origin: they hold nothing that is not public, and no CORS answer here ever allows
  credentials, so naming the origin is what ``*`` says, with the preflight answered as well.
- **A server on loopback** (development) allows every loopback origin, as the ``/mcp`` Origin
  check always has: the Inspector on ``http://localhost:6274`` works with no setting.

``/mcp`` is not served by Django (config/asgi.py routes it straight to the MCP app), so
``CorsAsgiMiddleware`` puts the library's own ``CorsMiddleware`` methods in front of it: it answers
preflights before bearer authentication and adds the same headers to every answer, a 401 too, so
a page can read its ``WWW-Authenticate``. The ``/mcp`` Origin check (``mcp_gateway.transport.auth``)
asks ``origin_allowed``, the same decision, so an origin that may read answers is exactly the one
that may send requests.
"""

from __future__ import annotations

import io
import re
from typing import Any
from urllib.parse import SplitResult, urlsplit

from corsheaders.conf import conf as cors_conf
from corsheaders.middleware import CorsMiddleware
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import BadHeaderError, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.asgi_http import request_header
from core.loopback import is_loopback_host

# An origin as a browser serializes one (RFC 6454 §6.2: scheme, host, optional port; hosts in
# ASCII), or "null"; anything else (spaces, control characters, a path, bytes past ASCII, a value
# longer than any real origin) is never allowed and never repeated back in a header.
MAX_ORIGIN_LENGTH = 512
_SERIALIZED_ORIGIN = re.compile(
    r"""null
    | [a-z][a-z0-9+.-]*://          # scheme
      (?: [a-z0-9_.-]+ | \[[0-9a-f:.]+\] )  # host: a name, IPv4, or bracketed IPv6
      (?: :[0-9]{1,5} )?            # port""",
    re.ASCII | re.VERBOSE,
)
# Only the headers the library's decision reads travel into the request it is asked about.
_DECISION_HEADERS = {b"origin", b"access-control-request-method", b"access-control-request-private-network"}


def _never_called(request: HttpRequest) -> HttpResponseBase:
    raise AssertionError("The CORS policy is asked for decisions only.")


_library = CorsMiddleware(_never_called)


def is_serialized_origin(origin: str) -> bool:
    return len(origin) <= MAX_ORIGIN_LENGTH and _SERIALIZED_ORIGIN.fullmatch(origin) is not None


def origin_allowed(origin: str) -> bool:
    """May a page from ``origin`` call Gatehouse's endpoints (and read their answers)?"""
    if not is_serialized_origin(origin):
        return False
    url = urlsplit(origin)
    return (
        bool(cors_conf.CORS_ALLOW_ALL_ORIGINS)
        or _library.origin_found_in_white_lists(origin, url)
        or (_loopback_development(url))
    )


def _loopback_development(url: SplitResult) -> bool:
    # A server on loopback is a developer's: any loopback origin is as local as it is.
    public_host = urlsplit(settings.PUBLIC_URL).hostname
    try:
        origin_host = url.hostname
    except ValueError:
        return False
    return url.scheme in {"http", "https"} and all(
        is_loopback_host(host, allow_localhost_name=True) for host in (public_host, origin_host)
    )


def cors_request_enabled(sender: object, request: HttpRequest, **kwargs: Any) -> bool:
    """django-cors-headers' ``check_request_enabled`` receiver: the two rules above, only ever on
    the paths ``CORS_URLS_REGEX`` names (the library also asks this for paths it does not)."""
    path = request.path_info
    if not re.match(cors_conf.CORS_URLS_REGEX, path):
        return False
    origin = request.headers.get("origin") or ""
    if not is_serialized_origin(origin):
        return False
    if re.match(settings.PUBLIC_DOCUMENT_URLS_REGEX, path):
        return True
    return _loopback_development(urlsplit(origin))


class CorsAsgiMiddleware:
    """django-cors-headers' policy for an ASGI app that Django does not serve (``/mcp``).

    A request with no Origin (every client that is not a browser) passes untouched. A preflight
    is answered here, as the library's middleware answers one, before anything behind it (bearer
    authentication, auditing) sees it; any other request goes on, and its answer, whatever it is,
    gets the headers the library adds.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or request_header(scope, b"origin") is None:
            await self.app(scope, receive, send)
            return
        request = _decision_request(scope)
        preflight = _library.check_preflight(request)
        if preflight is not None:
            await _send_empty(send, _with_cors_headers(request, preflight))
            return

        async def cors_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": _merged_headers(request, message.get("headers", []))}
            await send(message)

        await self.app(scope, receive, cors_send)


def _decision_request(scope: Scope) -> HttpRequest:
    # The body and the query string are never read, so they are not handed over: the query is
    # decoded as UTF-8 when a request is built, and need not be for this.
    return ASGIRequest(
        {
            "type": "http",
            "method": scope["method"],
            "path": scope["path"],
            "root_path": scope.get("root_path", ""),
            "headers": [
                (name, value) for name, value in scope.get("headers", []) if name in _DECISION_HEADERS
            ],
        },
        io.BytesIO(),
    )


def _with_cors_headers(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    # An Origin the library would repeat back but a header cannot carry (a line break, which no
    # HTTP server lets through, but an ASGI caller might) gets no CORS headers rather than a 500.
    if not is_serialized_origin(request.headers.get("origin") or ""):
        return response
    try:
        return _library.add_response_headers(request, response)
    except BadHeaderError:
        return response


def _merged_headers(request: HttpRequest, headers: Any) -> list[tuple[bytes, bytes]]:
    kept = [(bytes(name), bytes(value)) for name, value in headers]
    carrier = HttpResponse()
    vary = [value.decode("latin-1") for name, value in kept if name.lower() == b"vary"]
    if vary:
        carrier["Vary"] = ", ".join(vary)
    _with_cors_headers(request, carrier)
    added = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in carrier.items()
        if name.lower().startswith("access-control-") or name.lower() == "vary"
    ]
    return [(name, value) for name, value in kept if name.lower() != b"vary"] + added


async def _send_empty(send: Send, response: HttpResponseBase) -> None:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.items()]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": b""})

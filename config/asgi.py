"""ASGI entry point: /mcp to the MCP endpoint, everything else through Channels to Django.

Daphne serves it (``make run``); so can uvicorn and granian (docs/running.md), which also send the
ASGI lifespan events that Daphne never sends.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import re_path  # noqa: E402
from starlette.types import ASGIApp, Receive, Scope, Send  # noqa: E402

from config.daphne_http import daphne_form_parsing_off, daphne_reason_phrases  # noqa: E402
from core.cors import CorsAsgiMiddleware  # noqa: E402
from core.gc_tuning import gc_settle  # noqa: E402
from core.host_header import SingleHostMiddleware  # noqa: E402
from core.ratelimit.processes import rate_limit_processes_check  # noqa: E402
from core.request_context import RequestContextMiddleware  # noqa: E402
from mcp_gateway.transport.endpoint import mcp_app_build  # noqa: E402
from mcp_gateway.transport.standalone_stream import standalone_streams_end_all  # noqa: E402


async def lifespan(scope: Scope, receive: Receive, send: Send) -> None:
    """Acknowledge start and stop: there is nothing to do at either, since the MCP endpoint starts
    its machinery on its first request (it must, under Daphne). Unanswered, uvicorn logs that the
    application does not support lifespan and granian that it "errored"."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            # Standalone streams never end on their own: ended cleanly, their clients reconnect to
            # another worker at once and resume from their last event id.
            standalone_streams_end_all()
            await send({"type": "lifespan.shutdown.complete"})
            return


class McpFirst:
    """The MCP endpoint's path straight to it, before Channels' routing (which copies the scope and
    matches every pattern): its requests are most of what a busy server answers. Everything else,
    and the lifespan, go through ``routes``. The path is matched as Channels' URLRouter would match
    ``^mcp/?$``: under the server's ``root_path``, leading slashes aside."""

    def __init__(self, mcp: ASGIApp, routes: ASGIApp) -> None:
        self.mcp = mcp
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope.get("path", "")
            root_path: str = scope.get("root_path", "")
            if root_path and path.startswith(root_path):
                path = path[len(root_path) :]
            if path.lstrip("/") in MCP_PATHS:
                await self.mcp(scope, receive, send)
                return
        await self.routes(scope, receive, send)


MCP_PATHS = (settings.MCP_PATH.lstrip("/"), settings.MCP_PATH.lstrip("/") + "/")

router = McpFirst(
    # Django's CORS middleware never sees /mcp: the same policy is applied here, outermost, so
    # preflights are answered before authentication and every answer carries it.
    CorsAsgiMiddleware(mcp_app_build()),
    ProtocolTypeRouter(
        {
            "lifespan": lifespan,
            # Channels reuses Django's re_path for ASGI apps; the stubs only know views.
            "http": URLRouter([re_path(r"", django_asgi_app)]),  # type: ignore[arg-type]
        }
    ),
)

daphne_form_parsing_off()
daphne_reason_phrases()

# Several processes without a shared rate-limit storage each count alone: say so at start.
rate_limit_processes_check()

# Outermost, so every response (pages, OAuth, MCP, errors) carries its X-Request-Id; next, before
# anything reads a Host header, the refusal of requests with two.
application = RequestContextMiddleware(SingleHostMiddleware(router))

# Last: everything loaded so far lives as long as the process, and the collector need not walk it.
gc_settle()

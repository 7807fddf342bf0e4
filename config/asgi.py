"""ASGI entry point: Channels routes /mcp to the MCP endpoint, everything else to Django.

Daphne serves it (``make run``); so can uvicorn and granian (docs/running.md), which also send the
ASGI lifespan events that Daphne never sends.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402
from starlette.types import Receive, Scope, Send  # noqa: E402

from config.daphne_http import daphne_form_parsing_off, daphne_reason_phrases  # noqa: E402
from core.cors import CorsAsgiMiddleware  # noqa: E402
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


router = ProtocolTypeRouter(
    {
        "lifespan": lifespan,
        "http": URLRouter(
            [
                # Channels reuses Django's re_path for ASGI apps; the stubs only know views. Django's
                # CORS middleware never sees /mcp: the same policy is applied here, outermost, so
                # preflights are answered before authentication and every answer carries it.
                re_path(r"^mcp/?$", CorsAsgiMiddleware(mcp_app_build())),  # type: ignore[arg-type]
                re_path(r"", django_asgi_app),  # type: ignore[arg-type]
            ]
        ),
    }
)

daphne_form_parsing_off()
daphne_reason_phrases()

# Several processes without a shared rate-limit storage each count alone: say so at start.
rate_limit_processes_check()

# Outermost, so every response (pages, OAuth, MCP, errors) carries its X-Request-Id; next, before
# anything reads a Host header, the refusal of requests with two.
application = RequestContextMiddleware(SingleHostMiddleware(router))

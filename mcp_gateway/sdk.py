"""Every private name of the ``mcp`` SDK that Gatehouse uses, behind one small function each.

The SDK's private names (a leading underscore) can change in any release without notice, so product
code never touches them directly: it calls these functions, and an SDK upgrade re-checks only this
module. Written against ``mcp`` 2.3.0. On an upgrade, check for each function that the private name
still exists and still means the same, and whether a public way has appeared (then use it and drop
the function):

* ``server_drop_telemetry``: ``mcp.server._otel.OpenTelemetryMiddleware``, which the low-level
  ``Server`` installs first in ``middleware`` by default;
* ``server_lowlevel``: ``MCPServer._lowlevel_server``, the low-level ``Server`` an ``MCPServer``
  wraps, whose ``add_request_handler`` is public but which ``MCPServer`` does not expose;
* ``server_add_request_handler``: the same, for methods ``MCPServer`` has no decorator for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

ParamsT = TypeVar("ParamsT", bound=BaseModel)


def server_drop_telemetry(*, server: MCPServer) -> None:
    """Remove the SDK's OpenTelemetry middleware, which the SDK installs with no switch to turn it off.

    It costs ~8% of the event loop per request even with no exporter installed, and Gatehouse has
    its own observability (``core.metrics``, the audit trail, the access log).
    """
    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]


def server_lowlevel(*, server: MCPServer) -> Server[Any]:
    """The low-level ``Server`` inside ``server``: the kernel ``exchange`` serves handshake-era
    requests on (``mcp.server.runner.serve_one`` takes a low-level server, not an ``MCPServer``)."""
    return server._lowlevel_server


def server_add_request_handler(
    *,
    server: MCPServer,
    method: str,
    params_type: type[ParamsT],
    handler: Callable[[ServerRequestContext[Any, Any], ParamsT], Awaitable[Any]],
) -> None:
    """Serve a JSON-RPC method ``MCPServer`` has no public hook for (``logging/setLevel``,
    ``resources/subscribe``, ``resources/unsubscribe``), replacing the SDK's handler if it has one."""
    server_lowlevel(server=server).add_request_handler(method, params_type, handler)

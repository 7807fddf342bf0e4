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
* ``server_add_request_handler``: the same, for methods ``MCPServer`` has no decorator for;
* ``server_tool_schema_set``: ``MCPServer._tool_manager`` and its ``Tool.parameters``, the input
  schema a tool publishes (``add_tool`` derives it from the function's signature and takes none);

* ``client_session_closed``: ``ClientSession._dispatcher._closed``, whether an upstream session's
  connection has ended (``upstreams.pool`` does not lease such a session out again);
* ``client_session_negotiate``: ``mcp.client._probe.negotiate_auto``, the ``Client``'s
  ``mode="auto"`` connect (``server/discover`` at 2026-07-28, else the ``initialize`` handshake),
  which upstream sessions need on a bare ``ClientSession``;
* ``client_input_required_drive``: ``mcp.client._input_required.run_input_required_driver``, the
  ``Client``'s SEP-2322 loop (an upstream's ``InputRequiredResult`` answered through the session's
  own elicitation and sampling callbacks, and the request sent again with its ``requestState``).

``upstreams/oauth.py`` subclasses the SDK's ``ClientCredentialsOAuthProvider`` and so depends on its
private names too (``_auth_flow``, ``_initialized``, ``_fixed_client_info``,
``_exchange_token_client_credentials``, ``_handle_token_response`` and the ``context`` fields); its
docstring lists them, and an SDK upgrade re-checks that module with this one. So does
``upstreams/sign_in/provider.py``, on the SDK's ``OAuthClientProvider`` (``_initialize``,
``_auth_flow``, ``_perform_authorization_code_grant``, ``_initialized`` and the ``context`` fields
``token_expiry_time``, ``current_tokens`` and ``client_metadata.scope``).

Two more functions use public names only but copy SDK behaviour, so they are re-checked here too:

* ``server_resource_finder``: the lookup of ``ResourceManager.get_resource`` (static URIs, then the
  first matching template and its ``ResourceSecurity`` check);
* ``server_request_run``: what ``ServerRunner._on_request`` does with a request once it has its
  context: the handler's entry, its params validated, the server's middleware around it,
  outermost first, an ``ErrorData`` result raised as ``MCPError``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from mcp.client._input_required import run_input_required_driver
from mcp.client._probe import negotiate_auto
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources.templates import DEFAULT_RESOURCE_SECURITY
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from mcp_types import (
    METHOD_NOT_FOUND,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    InputResponses,
)
from pydantic import BaseModel

ParamsT = TypeVar("ParamsT", bound=BaseModel)
ResultT = TypeVar("ResultT")


def server_drop_telemetry(*, server: MCPServer) -> None:
    """Remove the SDK's OpenTelemetry middleware, which the SDK installs with no switch to turn it off.

    It costs event-loop time on every request even with no exporter installed (docs/benchmarks.md),
    and Gatehouse has its own observability (``core.metrics``, the audit trail, the access log).
    """
    server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]


def server_lowlevel(*, server: MCPServer) -> Server[Any]:
    """The low-level ``Server`` inside ``server``: the kernel ``transport.exchange_handshake_era``
    serves handshake-era requests on (``mcp.server.runner.serve_one`` takes a low-level server, not an
    ``MCPServer``)."""
    return server._lowlevel_server


def server_announce_list_changes(*, server: MCPServer) -> None:
    """Declare ``listChanged`` for tools, prompts and resources to handshake-era clients (they hear
    them on the standalone GET stream). ``serve_one`` builds the ``initialize`` result from
    ``create_initialization_options()`` with no ``NotificationOptions``, which declares none, and
    offers no parameter: the server's own method is given them. 2026-07-28 derives the flags from
    ``subscriptions/listen`` being served, whatever these say."""
    lowlevel = server_lowlevel(server=server)
    lowlevel.create_initialization_options = functools.partial(  # type: ignore[method-assign]
        lowlevel.create_initialization_options,
        NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
    )


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


def server_tool_schema_set(*, server: MCPServer, name: str, schema: dict[str, Any]) -> None:
    """Publish ``schema`` as the input schema of the tool ``name`` (already added), in place of the
    one derived from its signature, for keywords a signature cannot say (``$defs``, ``allOf``,
    ``if``/``then``/``else``). The request guard validates calls against the published schema; the
    function's signature still types the arguments it receives."""
    tool = server._tool_manager.get_tool(name)
    if tool is None:
        raise KeyError(name)
    tool.parameters = schema


async def server_resource_finder(*, server: MCPServer) -> Callable[[str], bool]:
    """Whether ``server`` would find a resource for a URI, answered without reading it.

    Built once all resources are registered. Assumes the server runs with the SDK's default
    ``resource_security`` (``server_build`` passes none).
    """
    static = frozenset(str(resource.uri) for resource in await server.list_resources())
    templates: Sequence[UriTemplate] = tuple(
        UriTemplate.parse(template.uri_template) for template in await server.list_resource_templates()
    )

    def finds(uri: str) -> bool:
        if uri in static:
            return True
        for template in templates:
            params = template.match(uri)
            if params is not None:
                # The first matching template decides, as in the SDK: a failed check is not found.
                return DEFAULT_RESOURCE_SECURITY.validate(params) is None
        return False

    return finds


def client_session_closed(*, session: ClientSession) -> bool:
    """Whether the connection under an SDK client session has ended (an SSE stream cut, a stdio
    child that died) while the session object lives on: a request on it would fail at once. An SDK
    without the attribute answers False (the request then fails, and its caller drops the session)."""
    return bool(getattr(getattr(session, "_dispatcher", None), "_closed", False))


async def client_session_negotiate(*, session: ClientSession) -> None:
    """Open ``session`` as the ``Client``'s ``mode="auto"`` does: ``server/discover`` at
    2026-07-28, else the ``initialize`` handshake."""
    await negotiate_auto(session)


async def client_input_required_drive(
    *,
    session: ClientSession,
    first: ResultT | InputRequiredResult,
    retry: Callable[[InputResponses | None, str | None], Awaitable[ResultT | InputRequiredResult]],
) -> ResultT:
    """The terminal result of a request whose first answer was ``first``: each
    ``InputRequiredResult`` is answered through ``session``'s own callbacks and the request sent
    again by ``retry`` (with the responses and the echoed ``requestState``)."""
    if not isinstance(first, InputRequiredResult):
        return first

    async def dispatch(key: str, request: InputRequest) -> InputResponse | ErrorData:
        meta = request.params.meta if request.params else None
        context = ClientRequestContext(session=session, request_id=key, meta=meta)
        return await session.dispatch_input_request(context, request)

    return await run_input_required_driver(first, dispatch=dispatch, retry=retry)


async def server_request_run(
    *, server: MCPServer, ctx: ServerRequestContext[Any, Any], method: str, params: dict[str, Any]
) -> Any:
    """Serve ``method`` with ``params`` inside the request ``ctx`` belongs to (its session, caller,
    back-channel and progress token), through every middleware of ``server`` and then its handler,
    as a request from the wire is served. Returns the handler's result model; raises what the chain
    raises (``MCPError`` for what the pipeline refused or translated)."""
    lowlevel = server_lowlevel(server=server)
    entry = lowlevel.get_request_handler(method)
    if entry is None:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method)

    async def handler(inner: ServerRequestContext[Any, Any]) -> Any:
        typed = entry.params_type.model_validate(inner.params or {}, by_name=False)
        result = await entry.handler(inner, typed)
        if isinstance(result, ErrorData):
            raise MCPError.from_error_data(result)
        return result

    call: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]] = handler
    for middleware in reversed(lowlevel.middleware):
        call = functools.partial(_through, middleware, call)
    return await call(replace(ctx, method=method, params=params))


async def _through(middleware: Any, call_next: Any, ctx: ServerRequestContext[Any, Any]) -> Any:
    return await middleware(ctx, call_next)

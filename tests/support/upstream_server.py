"""An MCP server for the upstream tests, run as its own process over Streamable HTTP, SSE or stdio:
``python tests/support/upstream_server.py http|sse|stdio [PORT] [--fd N] [--record FILE]
[--oauth CLIENT_ID:SECRET]``.
With ``--fd`` it serves the socket its parent bound to PORT and handed it, so no other process can
take the port between the parent choosing it and this one starting (``upstream_support``).

Its tools report what Gatehouse sent it (the headers of the HTTP request, for the credential tests),
send progress and log messages, wait to be cancelled, and ask the client through elicitation and
sampling. With ``--record``, every request's headers and every cancellation are appended to FILE as
JSON lines, so a test can assert what reached the upstream.

With ``--oauth`` (http and sse, PORT required) the server is also its own OAuth authorization
server, as a vendor's MCP server behind its identity provider would be: the SDK's resource-server
support publishes RFC 9728 metadata and answers 401 with ``WWW-Authenticate: Bearer
resource_metadata=...`` to a request without a valid token, and two routes of its own add RFC 8414
metadata and a client-credentials token endpoint for that one client, whose tokens are opaque and
short-lived (``--token-seconds``); each token issued is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import SamplingMessage, TextContent
from pydantic import AnyHttpUrl, BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

parser = argparse.ArgumentParser()
parser.add_argument("transport", choices=["http", "sse", "stdio"])
parser.add_argument("port", nargs="?", type=int, default=0)
parser.add_argument(
    "--fd", type=int, help="serve the listening socket on this descriptor (bound to PORT by the parent)"
)
parser.add_argument("--record", default="")
parser.add_argument(
    "--header-tool", action="store_true", help="also serve `route` (an x-mcp-header argument)"
)
parser.add_argument("--require-header", default="", help="NAME=VALUE every HTTP request must carry")
parser.add_argument("--oauth", default="", help="CLIENT_ID:SECRET: require tokens issued to that client")
parser.add_argument("--token-seconds", type=int, default=3600, help="how long an issued token lives")
parser.add_argument("--garbage-tokens", action="store_true", help="the token endpoint answers junk")
parser.add_argument(
    "--advertise-issuer", default="", help="name another authorization server in the resource metadata"
)
parser.add_argument(
    "--extra-tool",
    action="append",
    default=[],
    help="Also publish a tool of this name (saying its name), e.g. whoami to collide with Gatehouse's own",
)
options = parser.parse_args()


def record(event: dict[str, Any]) -> None:
    if options.record:
        with Path(options.record).open("a") as out:
            out.write(json.dumps(event) + "\n")


class Authorization:
    """The token verifier of the resource server and, on two routes, the authorization server."""

    def __init__(
        self, *, client: str, port: int, resource_path: str, token_seconds: int, advertised: str = ""
    ) -> None:
        self.client_id, _, self.client_secret = client.partition(":")
        # As the SDK renders it in the protected resource metadata: a root issuer ends in "/".
        self.issuer = f"http://127.0.0.1:{port}/"
        self.resource = f"http://127.0.0.1:{port}{resource_path}"
        self.token_seconds = token_seconds
        self.issued: dict[str, AccessToken] = {}
        # The server the resource metadata sends clients to: this one, unless a test makes the
        # upstream lead them elsewhere.
        self.advertised = advertised or self.issuer

    def settings(self) -> AuthSettings:
        return AuthSettings(
            issuer_url=AnyHttpUrl(self.advertised),
            resource_server_url=AnyHttpUrl(self.resource),
            validate_token_resource=True,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        # The SDK's bearer middleware refuses it once expires_at has passed.
        return self.issued.get(token)

    async def metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                # Not served (no person signs in here), but the SDK's client requires it.
                "authorization_endpoint": f"{self.issuer}authorize",
                "token_endpoint": f"{self.issuer}token",
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            }
        )

    def _client_authenticated(self, request: Request, form: dict[str, str]) -> bool:
        presented = (form.get("client_id", ""), form.get("client_secret", ""))
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "basic":
            decoded = base64.b64decode(encoded).decode(errors="replace")
            client_id, _, secret = decoded.partition(":")
            presented = (unquote(client_id), unquote(secret))
        return presented == (self.client_id, self.client_secret)

    async def token(self, request: Request) -> Response:
        form = {key: str(value) for key, value in (await request.form()).items()}
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        if not self._client_authenticated(request, form):
            record({"event": "token_refused"})
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if options.garbage_tokens:
            record({"event": "token_garbage"})
            return Response(b"\x00<html>\xff not a token", status_code=200, media_type="application/json")
        token = secrets.token_urlsafe(24)
        self.issued[token] = AccessToken(
            token=token,
            client_id=self.client_id,
            scopes=form.get("scope", "").split(),
            expires_at=int(time.time()) + self.token_seconds,
            resource=form.get("resource"),
        )
        record({"event": "token_issued", "token": token, "resource": form.get("resource")})
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": self.token_seconds})


if options.oauth:
    authorization = Authorization(
        client=options.oauth,
        port=options.port,
        resource_path="/sse" if options.transport == "sse" else "/mcp",
        token_seconds=options.token_seconds,
        advertised=options.advertise_issuer,
    )
    server = MCPServer(
        name="upstream-test",
        instructions="An upstream for Gatehouse's tests.",
        token_verifier=authorization,
        auth=authorization.settings(),
    )
    server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])(authorization.metadata)
    server.custom_route("/token", methods=["POST"])(authorization.token)
else:
    server = MCPServer(name="upstream-test", instructions="An upstream for Gatehouse's tests.")


def _headers(ctx: Context) -> dict[str, str]:
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None)
    return {k.lower(): v for k, v in headers.items()} if headers is not None else {}


class Echoed(BaseModel):
    text: str
    pid: int


@server.tool(description="Echo the text back.")
async def echo(text: str, ctx: Context) -> Echoed:
    record({"tool": "echo", "headers": _headers(ctx)})
    return Echoed(text=text, pid=os.getpid())


@server.tool(description="The HTTP headers this server received for the call.")
async def received_headers(ctx: Context) -> dict[str, str]:
    return _headers(ctx)


@server.tool(description="Count to n, reporting progress and logging each step.")
async def count_to(n: int, ctx: Context) -> str:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.info(f"counted {i}")
    return f"counted to {n}"


@server.tool(description="Sleep, unless cancelled first (which is recorded).")
async def sleep(seconds: float, ctx: Context) -> str:
    record({"tool": "sleep", "started": True})
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record({"tool": "sleep", "cancelled": True})
        raise
    return f"slept {seconds}"


class Name(BaseModel):
    name: str = Field(description="Your name")


@server.tool(description="Ask the user for their name (elicitation).")
async def ask_name(ctx: Context) -> str:
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


@server.tool(description="Ask the client's model (sampling) and return its answer.")
async def ask_model(prompt: str, ctx: Context) -> str:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    result = await ctx.request_context.session.create_message(
        [message], max_tokens=50, related_request_id=ctx.request_context.request_id
    )
    content = result.content
    blocks = content if isinstance(content, list) else [content]
    return "model says: " + "".join(b.text for b in blocks if isinstance(b, TextContent))


@server.tool(description="Publish one more tool, named as asked, and say that the tool list changed.")
async def add_tool(name: str, ctx: Context) -> str:
    async def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description="A tool added at run time.")
    await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="Say that the tool list changed, count times over (at most 20,000).")
async def flood_list_changed(count: int, ctx: Context) -> str:
    for _ in range(max(0, min(count, 20_000))):
        await ctx.request_context.session.send_tool_list_changed()
    return f"sent {count}"


@server.tool(description="A tool that fails with a message.")
async def fail() -> str:
    raise ValueError("this tool always fails")


@server.resource("upstream://notes/readme", description="A note.")
async def readme() -> str:
    return "upstream readme"


@server.resource("upstream://items/{item_id}", description="An item by id.")
async def item(item_id: str) -> str:
    return f"item {item_id}"


@server.prompt(description="A greeting prompt.")
def greet(name: str) -> str:
    return f"Please greet {name}."


def _extra_tool(name: str) -> None:
    async def extra() -> str:
        return f"extra tool {name}"

    server.add_tool(extra, name=name, description=f"An extra tool named {name}.")


for extra_name in options.extra_tool:
    _extra_tool(extra_name)


async def route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    record({"tool": "route", "region": region})
    return f"routed to {region}"


if options.header_tool:
    server.add_tool(route, description="Say where a call was routed; its region rides Mcp-Param-Region.")


def _serve_adopted(fd: int, security: TransportSecuritySettings) -> None:
    """What ``server.run`` does over HTTP, on a socket the parent bound and listens on."""
    import uvicorn

    if options.transport == "sse":
        app = server.sse_app(transport_security=security)
    else:
        app = server.streamable_http_app(transport_security=security)
    # Made here rather than by uvicorn's own ``fd`` option, which takes every descriptor for a Unix
    # socket, so its TCP connections would go without TCP_NODELAY.
    listener = socket.socket(fileno=fd)
    config = uvicorn.Config(app, log_level=server.settings.log_level.lower())
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


def main() -> None:
    if options.transport == "stdio":
        server.run("stdio")
        return
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if options.fd is not None:
        _serve_adopted(options.fd, security)
    elif options.transport == "sse":
        server.run("sse", host="127.0.0.1", port=options.port, transport_security=security)
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.port, transport_security=security)


if __name__ == "__main__":
    main()

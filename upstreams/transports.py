"""Open the byte streams of one upstream session, with Gatehouse's own credentials: the SDK's
Streamable HTTP, SSE and stdio client transports, and its OAuth providers (client credentials,
``upstreams.oauth``; a sign-in kept from an admin's authorization, ``upstreams.sign_in``), which
discover the upstream's authorization server from its metadata. The caller's
token is never sent: only, when the upstream asks for it, who the caller is, as plain headers.
Every HTTP request goes through ``upstreams.egress``, which refuses addresses upstreams may not
reach."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TextIO

import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from upstreams.config import UpstreamConfig
from upstreams.egress import upstream_http_client
from upstreams.models import AuthKind, Transport
from upstreams.oauth import upstream_oauth
from upstreams.sign_in.provider import upstream_sign_in

# An SSE or Streamable HTTP response stream may stay open between events this long.
STREAM_READ_SECONDS = 300.0
USER_HEADER = "X-Gatehouse-User"
TENANT_HEADER = "X-Gatehouse-Tenant"


def _errlog() -> TextIO:
    """Where a stdio upstream's stderr goes: the process's own (the subprocess needs a real file,
    which a captured ``sys.stderr`` under a test runner is not)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return sys.__stderr__ if sys.__stderr__ is not None else open(os.devnull, "w")
    return sys.stderr


def upstream_headers(config: UpstreamConfig, *, identity: Mapping[str, str]) -> dict[str, str]:
    headers = dict(identity) if config.pass_identity else {}
    if config.auth == AuthKind.HEADER and config.header_name:
        headers[config.header_name] = config.header_value
    return headers


async def _auth(config: UpstreamConfig) -> httpx2.Auth | None:
    """The httpx auth of a session: OAuth client credentials, or the upstream's OAuth sign-in
    (``upstreams.sign_in``: its stored tokens, or ``UpstreamSignInNeeded`` when there are none)."""
    if config.auth == AuthKind.OAUTH:
        return await upstream_oauth(config)
    if config.auth == AuthKind.OAUTH_CODE:
        return await upstream_sign_in(config)
    return None


@asynccontextmanager
async def upstream_streams(config: UpstreamConfig, *, identity: Mapping[str, str]) -> AsyncIterator[tuple]:
    """The (read, write) streams of a new connection to ``config``'s server."""
    if config.transport == Transport.STDIO:
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=dict(config.env) or None,
            cwd=config.cwd or None,
        )
        async with stdio_client(params, errlog=_errlog()) as streams:
            yield streams
        return
    headers = upstream_headers(config, identity=identity)
    auth = await _auth(config)
    if config.transport == Transport.SSE:
        async with sse_client(
            config.url,
            headers=headers,
            timeout=config.connect_timeout,
            sse_read_timeout=max(STREAM_READ_SECONDS, config.call_timeout),
            httpx_client_factory=upstream_http_client,
            auth=auth,
        ) as streams:
            yield streams
        return
    timeout = httpx2.Timeout(config.connect_timeout, read=max(STREAM_READ_SECONDS, config.call_timeout))
    async with (
        upstream_http_client(headers=headers, auth=auth, timeout=timeout) as client,
        streamable_http_client(config.url, http_client=client) as streams,
    ):
        yield streams

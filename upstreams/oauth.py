"""OAuth client credentials against an upstream's own authorization server, on the SDK's
``ClientCredentialsOAuthProvider``.

Each upstream configuration has one ``UpstreamOAuthState`` in the process: its access token and
when that expires, the metadata discovered, and the authorization server it is pinned to. Each
session opens a provider of its own over that shared state (the SDK's provider holds a lock from a
request's start to its response's headers, so one provider shared by the pool's sessions would
queue their calls behind each other). So every session uses the one token; while there is none, or
it has expired, one session at a time gets it and the others wait to take it up. Once expired, a
new one is asked for before the request is sent: the SDK itself would send that request without a
token and start again from the upstream's 401 (discovery, token, retry), which it still does when
the upstream refuses a token before its time (an upstream restart forgets its tokens).

The issuer: the SDK sends the client secret only to an authorization server whose metadata names
the issuer it is given (and warns when it is given none). Gatehouse asks for no issuer: the first
connection of a configuration in this process reads it from the upstream's protected resource
metadata (RFC 9728; without such metadata, the upstream's origin, as the SDK's legacy path
expects) and pins it, so as long as the process and the configuration last, the upstream cannot
lead the secret to another server.

The SDK's provider has no public hook for any of this, so ``UpstreamOAuth`` uses its private
names: ``_auth_flow`` (overridden and called), ``_initialized``, ``_fixed_client_info``,
``_exchange_token_client_credentials`` and ``_handle_token_response``, and the fields of its
``context``. Written against ``mcp`` 2.3.0; an SDK upgrade re-checks them (``mcp_gateway.kernel.sdk``
lists this module among its checks), and ``tests/upstreams/test_upstream_oauth_tokens.py`` and
``tests/e2e/upstreams/test_upstreams_oauth.py`` fail if their meaning changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_protected_resource_response,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from mcp.shared.auth_utils import calculate_token_expiry

from upstreams.config import ConfigKey, UpstreamConfig
from upstreams.egress import upstream_http_client


@dataclass(eq=False)
class UpstreamOAuthState:
    """What the sessions of one upstream configuration share (the SDK's ``TokenStorage``, plus the
    discovery's results). The client's information is the configuration's, never stored here."""

    issuer: str
    tokens: OAuthToken | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: str | None = None
    resource_metadata: ProtectedResourceMetadata | None = None
    server_metadata: OAuthMetadata | None = None
    authorization_server: str | None = None
    # Per event loop (asyncio locks belong to one): Daphne has one, a command or a test may have more.
    _locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = field(
        default_factory=weakref.WeakKeyDictionary, repr=False
    )

    def needs_token(self) -> bool:
        return self.tokens is None or (self.expires_at is not None and time.time() > self.expires_at)

    def fetching(self) -> asyncio.Lock:
        """Held by the one session that gets the configuration a token, while the others wait
        for it: the pool's sessions start (and find the token expired) together."""
        return self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.expires_at = calculate_token_expiry(tokens.expires_in)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        return None


_states: dict[ConfigKey, UpstreamOAuthState] = {}


class UpstreamOAuth(ClientCredentialsOAuthProvider):
    """One session's provider: the SDK's, reading and writing the configuration's shared state."""

    def __init__(self, config: UpstreamConfig, state: UpstreamOAuthState) -> None:
        super().__init__(
            server_url=config.url,
            storage=state,
            client_id=config.oauth_client_id,
            client_secret=config.oauth_client_secret,
            scope=config.oauth_scope or None,
            issuer=state.issuer,
        )
        self._state = state

    def _adopt_shared(self) -> None:
        """Take up what another session of the configuration learned: its token, its discovery."""
        context, state = self.context, self._state
        context.client_info = self._fixed_client_info
        self._initialized = True
        if context.current_tokens is not state.tokens:
            context.current_tokens = state.tokens
            context.token_expiry_time = state.expires_at
        if context.oauth_metadata is None and state.server_metadata is not None:
            context.protected_resource_metadata = state.resource_metadata
            context.oauth_metadata = state.server_metadata
            context.auth_server_url = state.authorization_server
            context.client_metadata.scope = state.scope

    def _share(self) -> None:
        context, state = self.context, self._state
        if context.oauth_metadata is not None:
            state.resource_metadata = context.protected_resource_metadata
            state.server_metadata = context.oauth_metadata
            state.authorization_server = context.auth_server_url
            state.scope = context.client_metadata.scope

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        fetching = self._state.fetching() if self._state.needs_token() else contextlib.nullcontext()
        async with fetching:
            flow = self._session_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                pass
            finally:
                await flow.aclose()

    async def _session_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        async with self.context.lock:
            self._adopt_shared()
            context = self.context
            expired = context.current_tokens is not None and not context.is_token_valid()
            if expired and context.oauth_metadata is not None:
                # A new token from the token endpoint already known (a refusal raises
                # OAuthTokenError, and the call fails as on any other connection failure).
                response = yield await self._exchange_token_client_credentials()
                await self._handle_token_response(response)
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            pass
        finally:
            await flow.aclose()
        self._share()


async def _issuer_discover(config: UpstreamConfig) -> str:
    """The authorization server the upstream's protected resource metadata names first; without
    such metadata, the upstream's origin."""
    async with upstream_http_client(timeout=httpx2.Timeout(config.connect_timeout)) as http:
        for url in build_protected_resource_metadata_discovery_urls(None, config.url):
            metadata = await handle_protected_resource_response(
                await http.send(create_oauth_metadata_request(url))
            )
            if metadata is not None and metadata.authorization_servers:
                return str(metadata.authorization_servers[0])
    parts = urlsplit(config.url)
    return f"{parts.scheme}://{parts.netloc}"


def upstream_oauth_forget(*, key: ConfigKey) -> None:
    """Drop the token and discovery state kept for a configuration no one will use again (a
    configuration test's one-off key)."""
    _states.pop(key, None)


async def upstream_oauth(config: UpstreamConfig) -> UpstreamOAuth:
    """A provider for a new session of ``config``'s upstream, over the configuration's state."""
    state = _states.get(config.key)
    if state is None:
        state = UpstreamOAuthState(issuer=await _issuer_discover(config))
        # An edited upstream is a new configuration: what the old one held is of no further use.
        for key in [key for key in _states if key[0] == config.id and key != config.key]:
            del _states[key]
        state = _states.setdefault(config.key, state)
    return UpstreamOAuth(config, state)

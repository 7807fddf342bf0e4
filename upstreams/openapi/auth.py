"""The credentials an OpenAPI upstream's calls carry: a static header (an API key, or
``Authorization: Bearer ...``), an API key in the query, or an access token got with OAuth 2
client credentials from the token URL the document names.

Tokens are kept per upstream configuration in the process (as ``upstreams.oauth`` keeps an MCP
upstream's), until they expire (less a minute) or the API refuses one; one call at a time gets a
new one while the others wait for it. The token request is Authlib's (its body, its client
authentication, ``client_secret_basic``; its token, whose expiry it reads), sent through the
upstreams' egress-checked client like every other request made for an upstream.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass, field

import httpx2
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749 import OAuth2Token
from authlib.oauth2.rfc6749.parameters import prepare_token_request

from upstreams.config import ConfigKey, UpstreamConfig
from upstreams.egress import upstream_http_client
from upstreams.models import AuthKind

MAX_TOKEN_RESPONSE = 64 * 1024
# A token this close to its expiry is not used: the call it is sent with would outlive it.
LEEWAY_SECONDS = 60
NO_TOKEN_URL = "the document names no OAuth 2 client credentials token URL"
TOKEN_REFUSED = "the token endpoint answered HTTP {status}"
TOKEN_INVALID = "the token endpoint's answer is not an OAuth 2 token"


class OpenApiOAuthError(Exception):
    """No token from the API's authorization server; the message never carries a secret. Its
    name says OAuth, which is how the federation words the failure for the caller."""


@dataclass(eq=False)
class _TokenState:
    token: OAuth2Token | None = field(default=None, repr=False)
    _locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = field(
        default_factory=weakref.WeakKeyDictionary, repr=False
    )

    def lock(self) -> asyncio.Lock:
        return self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


_states: dict[ConfigKey, _TokenState] = {}


def _state(config: UpstreamConfig) -> _TokenState:
    state = _states.get(config.key)
    if state is None:
        # An edited upstream is a new configuration: the old one's token is of no further use.
        for key in [key for key in _states if key[0] == config.id]:
            del _states[key]
        state = _states.setdefault(config.key, _TokenState())
    return state


async def _token_request(config: UpstreamConfig) -> OAuth2Token:
    if not config.openapi_token_url:
        raise OpenApiOAuthError(NO_TOKEN_URL)
    body = prepare_token_request("client_credentials", scope=config.oauth_scope or None)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    auth = ClientAuth(config.oauth_client_id, config.oauth_client_secret, "client_secret_basic")
    url, headers, body = auth.prepare("POST", config.openapi_token_url, headers, body)
    async with (
        upstream_http_client(timeout=httpx2.Timeout(config.connect_timeout)) as client,
        client.stream("POST", url, headers=headers, content=body) as response,
    ):
        if response.status_code != 200:
            raise OpenApiOAuthError(TOKEN_REFUSED.format(status=response.status_code))
        content = b""
        async for chunk in response.aiter_bytes():
            content += chunk
            if len(content) > MAX_TOKEN_RESPONSE:
                raise OpenApiOAuthError(TOKEN_INVALID)
    try:
        loaded = json.loads(content)
    except ValueError:
        raise OpenApiOAuthError(TOKEN_INVALID) from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("access_token"), str):
        raise OpenApiOAuthError(TOKEN_INVALID)
    return OAuth2Token.from_dict(loaded)


def _usable(token: OAuth2Token | None) -> bool:
    return token is not None and not token.is_expired(leeway=LEEWAY_SECONDS)


async def openapi_access_token(*, config: UpstreamConfig, refused: str | None = None) -> str:
    """An access token for ``config``'s API: the one kept, or a new one. ``refused`` is a token
    the API has just refused: it is not given again."""
    state = _state(config)
    token = state.token
    if _usable(token) and token is not None and token["access_token"] != refused:
        return str(token["access_token"])
    async with state.lock():
        token = state.token
        if not (_usable(token) and token is not None and token["access_token"] != refused):
            token = state.token = await _token_request(config)
    return str(token["access_token"])


def openapi_token_forget(*, key: ConfigKey) -> None:
    """Drop the token kept for a configuration no one will use again (a test's one-off key)."""
    _states.pop(key, None)


async def openapi_credentials(
    *, config: UpstreamConfig, refused: str | None = None
) -> tuple[dict[str, str], list[tuple[str, str]], str | None]:
    """The headers and query parameters a call to ``config``'s API carries, and the OAuth access
    token among them (None for the other kinds)."""
    if config.auth == AuthKind.HEADER and config.header_name:
        return {config.header_name: config.header_value}, [], None
    if config.auth == AuthKind.QUERY and config.header_name:
        return {}, [(config.header_name, config.header_value)], None
    if config.auth == AuthKind.OAUTH:
        token = await openapi_access_token(config=config, refused=refused)
        return {"Authorization": f"Bearer {token}"}, [], token
    return {}, [], None

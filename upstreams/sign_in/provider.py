"""The SDK's ``OAuthClientProvider`` for an upstream that signs in with OAuth (authorization code
with PKCE), over the upstream's grant in the database (``storage``).

Discovery, registration (pre-registered, CIMD or dynamic), scope selection and step-up, the token
exchange, refresh and the ``iss`` checks are the SDK's. What is Gatehouse's is the "browser": who
takes the authorization URL to a person and brings back the code.

- A pooled session (a member's call) has none: when the SDK would send someone to sign in (no
  usable token, a refresh refused, a scope step-up), the call fails at once with
  ``UpstreamSignInNeeded``, which names the upstream and asks for a tenant admin to connect it
  again; it never waits for a person who is not there.
- The console's connect flow (``upstreams.sign_in.connect``) gives its provider an
  ``Interactive``: the URL goes to the admin's browser, the code comes back through the callback.
- A process may install an ``Interactive`` for an upstream (``upstream_interactive_set``): the
  conformance client's headless browser, which its pooled sessions then use for a step-up too.

Written against ``mcp`` 2.3.0: ``_initialize``, ``_auth_flow`` and ``_perform_authorization_code_grant``
are overridden (their meaning is checked by ``tests/upstreams/test_upstream_sign_in.py``,
``tests/portal/test_console_upstream_connect.py`` and the conformance scenarios).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2
from django.conf import settings
from django.urls import reverse
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from core.errors import UpstreamUnavailable
from upstreams.config import UpstreamConfig
from upstreams.sign_in.models import UpstreamGrant
from upstreams.sign_in.storage import GrantStorage

RECONNECT = (
    "it signs in with OAuth and Gatehouse holds no usable sign-in for it: "
    "a tenant admin must connect it (again) in the console"
)
CLIENT_NAME = "Gatehouse"
GRANT_TYPES = ["authorization_code", "refresh_token"]

Authorize = Callable[[str], Awaitable[AuthorizationCodeResult]]


class UpstreamSignInNeeded(UpstreamUnavailable):
    """The upstream needs a person to sign in, and there is none to ask: a tenant admin must
    connect it (again) in the console."""

    reason = RECONNECT

    def __init__(self, *, upstream: str) -> None:
        super().__init__(upstream=upstream, reason=RECONNECT)


@dataclass(frozen=True)
class Interactive:
    """A browser: ``authorize`` takes the authorization URL to a person (or a headless stand-in)
    and returns what the authorization server redirected back with."""

    authorize: Authorize
    # The client id as a URL (CIMD), used when the authorization server supports it.
    client_metadata_url: str | None = None


_interactive: dict[int, Interactive] = {}


def upstream_interactive_set(*, upstream_id: int, interactive: Interactive | None) -> None:
    """Install (or, with ``None``, remove) the browser this process's sessions of the upstream use
    when its server asks for a sign-in."""
    if interactive is None:
        _interactive.pop(upstream_id, None)
    else:
        _interactive[upstream_id] = interactive


def upstream_interactive_installed(*, upstream_id: int) -> bool:
    """Whether this process has a browser for the upstream (its connection test can sign in)."""
    return upstream_id in _interactive


def sign_in_redirect_uri() -> str:
    """Where authorization servers send the admin's browser back: one per deployment."""
    return f"{settings.PUBLIC_URL}{reverse('console:upstream-connected')}"


def sign_in_client_metadata_url() -> str | None:
    """Gatehouse's client metadata document (CIMD), when the deployment is public over https (the
    SDK, and any authorization server fetching it, want https)."""
    if urlsplit(settings.PUBLIC_URL).scheme != "https":
        return None
    return f"{settings.PUBLIC_URL}{reverse('console:upstream-client-metadata')}"


def sign_in_client_metadata(*, scope: str | None = None) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        redirect_uris=[sign_in_redirect_uri()],  # type: ignore[list-item]
        grant_types=list(GRANT_TYPES),
        response_types=["code"],
        client_name=CLIENT_NAME,
        scope=scope,
        # A confidential web application: the redirect URI is the deployment's own page.
        application_type="web",
    )


# One refresh at a time per upstream (per event loop: asyncio locks belong to one): the pool's
# sessions find the token expired together, and a rotating refresh token is good for one use.
_refreshing: dict[int, weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]] = {}


def _refresh_lock(upstream_id: int) -> asyncio.Lock:
    locks = _refreshing.setdefault(upstream_id, weakref.WeakKeyDictionary())
    return locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


class UpstreamSignIn(OAuthClientProvider):
    def __init__(
        self, config: UpstreamConfig, *, storage: GrantStorage, interactive: Interactive | None
    ) -> None:
        super().__init__(
            server_url=config.url,
            client_metadata=sign_in_client_metadata(scope=config.oauth_scope or None),
            storage=storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=(
                interactive.client_metadata_url if interactive is not None else sign_in_client_metadata_url()
            ),
        )
        self._config = config
        self._grant = storage
        self._interactive = interactive
        self._authorization_url = ""

    async def _redirect(self, authorization_url: str) -> None:
        if self._interactive is None:
            raise UpstreamSignInNeeded(upstream=self._config.name)
        self._authorization_url = authorization_url

    async def _callback(self) -> AuthorizationCodeResult:
        assert self._interactive is not None  # _redirect refused first
        return await self._interactive.authorize(self._authorization_url)

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        # The SDK asks for the scope the upstream names (WWW-Authenticate, then its metadata); the
        # scope an admin configured is asked for as well (offline_access, say).
        configured = self._config.oauth_scope or None
        self.context.client_metadata.scope = union_scopes(self.context.client_metadata.scope, configured)
        return await super()._perform_authorization_code_grant()

    async def _initialize(self) -> None:
        await super()._initialize()
        # The SDK keeps no expiry for stored tokens: without it an expired token is sent, refused,
        # and the refusal taken for a sign-in needed (which only a person can give).
        self.context.token_expiry_time = self._grant.expires_at

    async def _adopt_stored(self) -> None:
        """Another session (or worker) may have refreshed the token already: take it up rather
        than spend the refresh token a second time."""
        tokens = await self._grant.get_tokens()
        if tokens is not None and self._grant.valid_now():
            self.context.current_tokens = tokens
            self.context.token_expiry_time = self._grant.expires_at

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        stale = self._initialized and not self.context.is_token_valid()
        held = _refresh_lock(self._config.id) if stale else contextlib.nullcontext()
        async with held:
            if stale:
                await self._adopt_stored()
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


async def upstream_sign_in(
    config: UpstreamConfig, *, interactive: Interactive | None = None, fresh: bool = False
) -> UpstreamSignIn:
    """A provider for a new session of ``config``'s upstream. Without a browser (``interactive``,
    else the one installed for the upstream) and without a stored sign-in, ``UpstreamSignInNeeded``
    at once: nothing is sent to the upstream (no registration made) for a call that cannot work."""
    interactive = interactive or _interactive.get(config.id)
    storage = GrantStorage(config=config, redirect_uri=sign_in_redirect_uri(), fresh=fresh)
    if interactive is None:
        held = (
            await UpstreamGrant.objects.filter(upstream_id=config.id).exclude(tokens_encrypted="").aexists()
        )
        if not held:
            raise UpstreamSignInNeeded(upstream=config.name)
    return UpstreamSignIn(config, storage=storage, interactive=interactive)

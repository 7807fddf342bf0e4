"""A hand-driven OAuth client for the authorization server's tests: every parameter is the test's."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import httpx2
from django.utils import timezone
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthToken
from oauth2_provider.models import Application, set_token_value
from oauth2_provider.settings import oauth2_settings
from oauthlib.common import generate_token

from accounts.models import Membership
from accounts.scopes import scope_definitions, scopes_granted
from tests.e2e.harness import REDIRECT_URI, Browser, DaphneServer, MemoryTokenStorage, Person, redirect_params
from tests.support.factories import AccessTokenFactory, ApplicationFactory

# What ``access_token`` (and ``OAuthDriver``) asks for unless told otherwise.
DEFAULT_SCOPE = "mcp:read mcp:write"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class OAuthDriver:
    """A hand-driven OAuth client for denial tests: every parameter is the test's to choose."""

    def __init__(self, server: DaphneServer) -> None:
        self.server = server
        self.http = httpx.AsyncClient(base_url=server.base_url, follow_redirects=False, timeout=30)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def register(self, *, redirect_uris: list[str] | None = None) -> str:
        response = await self.http.post(
            "/oauth/register/",
            json={
                "client_name": "Gatehouse denial tests",
                "redirect_uris": redirect_uris or [REDIRECT_URI],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
        )
        assert response.status_code == 201, response.text
        return str(response.json()["client_id"])

    def authorize_url(
        self,
        *,
        client_id: str,
        challenge: str | None,
        method: str | None = "S256",
        **extra: str | list[str],
    ) -> str:
        """The authorization URL; a list value (``resource=[...]``) repeats its parameter."""
        params: dict[str, str | list[str]] = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "scope": DEFAULT_SCOPE,
            "state": secrets.token_urlsafe(8),
            "resource": self.server.resource_url,
        }
        if challenge is not None:
            params["code_challenge"] = challenge
        if method is not None:
            params["code_challenge_method"] = method
        params.update(extra)
        return f"/oauth/authorize/?{urlencode(params, doseq=True)}"

    async def exchange(
        self, *, client_id: str, code: str, verifier: str | None, **extra: str
    ) -> httpx.Response:
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "resource": self.server.resource_url,
            **extra,
        }
        if verifier is not None:
            data["code_verifier"] = verifier
        return await self.http.post("/oauth/token/", data=data)

    async def open_authorization(
        self,
        browser: Browser,
        person: Person,
        *,
        challenge: str | None = "fresh",
        method: str | None = "S256",
        **extra: str,
    ) -> tuple[str, httpx.Response]:
        """Register a client and open its authorization URL as the person; ``challenge="fresh"``
        makes a valid S256 challenge. Returns (client_id, the page or redirect the person sees)."""
        client_id = await self.register()
        if challenge == "fresh":
            _, challenge = pkce_pair()
        url = self.authorize_url(client_id=client_id, challenge=challenge, method=method, **extra)
        return client_id, await browser.open(url, username=person.username, password=person.password)

    async def code_for(
        self,
        person: Person,
        *,
        client_id: str | None = None,
        scope: str | None = None,
        resource: str | None = None,
    ) -> tuple[str, str, str]:
        """Run the browser part; return (client_id, code, verifier). ``resource``: the resource
        indicator to ask for (default: the MCP endpoint)."""
        client_id = client_id or await self.register()
        verifier, challenge = pkce_pair()
        extra = {"scope": scope} if scope else {}
        if resource is not None:
            extra["resource"] = resource
        browser = Browser(self.server.base_url)
        try:
            response = await browser.authorize(
                self.authorize_url(client_id=client_id, challenge=challenge, **extra),
                username=person.username,
                password=person.password,
                tenant=person.tenant,
            )
        finally:
            await browser.aclose()
        return client_id, redirect_params(response)["code"], verifier

    async def token_for(
        self, person: Person, *, scope: str | None = None, resource: str | None = None
    ) -> dict[str, Any]:
        """Tokens for the person (for ``resource``, default the MCP endpoint)."""
        client_id, code, verifier = await self.code_for(person, scope=scope, resource=resource)
        response = await self.exchange(
            client_id=client_id,
            code=code,
            verifier=verifier,
            **({"resource": resource} if resource is not None else {}),
        )
        assert response.status_code == 200, response.text
        return {**response.json(), "client_id": client_id}


async def access_token(server: DaphneServer, person: Person, *, scope: str | None = None) -> str:
    """A token for the person, through registration, the browser pages and the token endpoint
    (with ``scope``, those scopes; else ``DEFAULT_SCOPE``)."""
    driver = OAuthDriver(server)
    try:
        return str((await driver.token_for(person, scope=scope))["access_token"])
    finally:
        await driver.aclose()


# Tokens minted directly, for tests of what a token lets a client do rather than of how one is
# obtained (tests/e2e/oauth/): a flow costs the server about a quarter of a second, a minted token
# a hundredth. The client has a name of its own, so a test that looks at the client is seen to.
MINTED_CLIENT_NAME = "Gatehouse e2e minted token"


def _token_mint(*, person: Person, requested: list[str], resource: str, seconds: int) -> tuple[str, str]:
    """(token, scope) as the flow would issue them: in ``person.tenant``, else the tenant the
    consent page offers first; the requested scopes the role allows (oauth.authorize); stored as its
    checksum only, for a public client registered as the flows' are."""
    memberships = Membership.objects.filter(user__username=person.username, tenant__is_active=True)
    if person.tenant is not None:
        memberships = memberships.filter(tenant__slug=person.tenant)
    membership = memberships.select_related("user", "tenant").order_by("tenant__slug").first()
    assert membership is not None, f"{person.username} has no membership to mint a token in"
    granted = scopes_granted(requested=requested, role=membership.role)
    assert granted, f"the consent page would refuse {person.username}: the role allows none of {requested}"
    application = ApplicationFactory(
        name=MINTED_CLIENT_NAME,
        redirect_uris=REDIRECT_URI,
        registration_source=Application.RegistrationSource.DCR,
    )
    token = AccessTokenFactory.build(
        membership=membership,
        application=application,
        scope=" ".join(granted),
        expires=timezone.now() + timedelta(seconds=seconds),
        resource=[resource],
    )
    raw_token = generate_token()
    set_token_value(token, raw_token)
    token.save()
    return raw_token, token.scope


def _minted(
    committed: Callable[..., Any], server: DaphneServer, person: Person, *, requested: Iterable[str]
) -> OAuthToken:
    seconds = int(server.env.get("OAUTH_ACCESS_TOKEN_SECONDS", oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS))
    token, scope = committed(
        _token_mint, person=person, requested=list(requested), resource=server.resource_url, seconds=seconds
    )
    return OAuthToken(access_token=token, expires_in=seconds, scope=scope)


def minted_token(
    committed: Callable[..., Any], server: DaphneServer, person: Person, *, scope: str | None = None
) -> str:
    """The token ``access_token(server, person, scope=scope)`` would get, made directly through the
    ``committed`` fixture, which deletes it after the test."""
    return _minted(committed, server, person, requested=(scope or DEFAULT_SCOPE).split()).access_token


@asynccontextmanager
async def minted_sdk_client(
    committed: Callable[..., Any],
    server: DaphneServer,
    person: Person,
    *,
    mode: str = "legacy",
    storage: MemoryTokenStorage | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    **client_options: Any,
) -> AsyncIterator[tuple[Client, MemoryTokenStorage]]:
    """``sdk_client`` holding the token its flow would get, made directly: every scope the server's
    challenge names (all there are) that the person's role allows. A ``storage`` that already holds
    a token lends it, as one sign-in serves ``sdk_client``s sharing a storage. Nothing refreshes the
    token or steps it up: tests of those stay on ``sdk_client``."""
    storage = storage or MemoryTokenStorage()
    if storage.tokens is None:
        await storage.set_tokens(_minted(committed, server, person, requested=scope_definitions()))
    assert storage.tokens is not None
    headers = {"Authorization": f"Bearer {storage.tokens.access_token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, transport=transport) as http,
        Client(
            streamable_http_client(server.mcp_url, http_client=http), mode=mode, **client_options
        ) as client,
    ):
        yield client, storage

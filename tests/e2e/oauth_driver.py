"""A hand-driven OAuth client for the authorization server's tests: every parameter is the test's."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode

import httpx

from tests.e2e.harness import REDIRECT_URI, Browser, DaphneServer, Person, redirect_params


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
            "scope": "mcp:read mcp:write",
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
    (with ``scope``, those scopes; else ``mcp:read mcp:write``)."""
    driver = OAuthDriver(server)
    try:
        return str((await driver.token_for(person, scope=scope))["access_token"])
    finally:
        await driver.aclose()

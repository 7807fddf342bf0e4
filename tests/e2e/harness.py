"""Real parts for end-to-end tests: a Daphne subprocess, a person's browser, an OAuth client."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import httpx2
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

BASE_DIR = Path(__file__).resolve().parents[2]
REDIRECT_URI = "http://127.0.0.1:9/callback"
DEMO_PASSWORD = "demo-password-for-tests"
# Shared by every server process of a run, as real replicas share one secret.
E2E_SECRET_KEY = "e2e-secret-key-" + secrets.token_hex(16)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DaphneServer:
    """Gatehouse under Daphne in its own process, on the test database."""

    def __init__(
        self,
        *,
        database_url: str,
        log_path: Path,
        public_url: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.mcp_url = f"{self.base_url}/mcp"
        # Several processes behind one load balancer share one public URL.
        self.public_url = public_url or self.base_url
        self.resource_url = f"{self.public_url}/mcp"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DEBUG": "false",
            "SECRET_KEY": E2E_SECRET_KEY,
            "PORT": str(self.port),
            "PUBLIC_URL": self.public_url,
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "config.asgi:application",
            ],
            cwd=BASE_DIR,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Daphne exited early:\n{self.log_path.read_text()}")
            try:
                if (
                    httpx.get(
                        f"{self.base_url}/.well-known/oauth-authorization-server", timeout=2
                    ).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"Daphne did not become ready:\n{self.log_path.read_text()}")

    def kill(self) -> None:
        """Die the hard way, as a crashed or OOM-killed worker would."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self.forms.append({"action": attributes.get("action") or "", "fields": {}, "radios": {}})
        elif tag == "input" and self.forms and attributes.get("name"):
            name = attributes["name"] or ""
            kind = attributes.get("type", "text")
            if kind == "radio":
                self.forms[-1]["radios"].setdefault(name, []).append(attributes.get("value") or "")
            elif kind in {"hidden", "text", "password"}:
                self.forms[-1]["fields"][name] = attributes.get("value") or ""


def parse_form(html: str) -> dict[str, Any]:
    parser = _FormParser()
    parser.feed(html)
    assert parser.forms, f"no form on the page:\n{html[:2000]}"
    return parser.forms[-1]


class Browser:
    """A person's browser: cookies, login form, consent form. It never follows the final redirect."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.client = httpx.AsyncClient(base_url=base_url, follow_redirects=False, timeout=30)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def open(self, url: str, *, username: str, password: str) -> httpx.Response:
        """GET the authorization URL, signing in on the way if asked to."""
        response = await self.client.get(url)
        if response.status_code == 302 and urlsplit(response.headers["location"]).path == "/accounts/login/":
            login_url = urljoin(self.base_url, response.headers["location"])
            page = await self.client.get(login_url)
            form = parse_form(page.text)
            fields = {**form["fields"], "username": username, "password": password}
            signed_in = await self.client.post(login_url, data=fields)
            assert signed_in.status_code == 302, (
                f"login failed: {signed_in.status_code}\n{signed_in.text[:500]}"
            )
            response = await self.client.get(urljoin(self.base_url, signed_in.headers["location"]))
        return response

    async def decide(
        self, consent_page: httpx.Response, *, tenant: str | None = None, allow: bool = True
    ) -> httpx.Response:
        form = parse_form(consent_page.text)
        fields = dict(form["fields"])
        fields["tenant"] = tenant if tenant is not None else form["radios"]["tenant"][0]
        if allow:
            fields["allow"] = "Authorize"
        return await self.client.post(str(consent_page.request.url), data=fields)

    async def authorize(
        self, url: str, *, username: str, password: str, tenant: str | None = None, allow: bool = True
    ) -> httpx.Response:
        page = await self.open(url, username=username, password=password)
        assert page.status_code == 200, (
            f"expected the consent page, got {page.status_code}: {page.text[:500]}"
        )
        return await self.decide(page, tenant=tenant, allow=allow)


def redirect_params(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 302, (
        f"expected a redirect, got {response.status_code}: {response.text[:500]}"
    )
    location = response.headers["location"]
    assert location.startswith(REDIRECT_URI), location
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


@dataclass
class MemoryTokenStorage:
    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None
    history: list[OAuthToken] = field(default_factory=list)

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class Person:
    username: str
    password: str = DEMO_PASSWORD
    tenant: str | None = None
    logins: int = 0


class RoundRobin(httpx2.AsyncHTTPTransport):
    """A load balancer in miniature: each request goes to the next server's port, Host unchanged."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__()
        self.ports = ports
        self.served: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[len(self.served) % len(self.ports)]
        self.served.append(port)
        request.url = request.url.copy_with(port=port)
        return await super().handle_async_request(request)


@asynccontextmanager
async def sdk_client(
    server: DaphneServer,
    person: Person,
    *,
    mode: str = "legacy",
    storage: MemoryTokenStorage | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> AsyncIterator[tuple[Client, MemoryTokenStorage]]:
    """The official SDK client with its OAuthClientProvider; the person consents in the browser."""
    storage = storage or MemoryTokenStorage()
    browser = Browser(server.base_url)
    outcome: dict[str, httpx.Response] = {}

    async def redirect_handler(authorization_url: str) -> None:
        person.logins += 1
        outcome["response"] = await browser.authorize(
            authorization_url, username=person.username, password=person.password, tenant=person.tenant
        )

    async def callback_handler() -> AuthorizationCodeResult:
        params = redirect_params(outcome["response"])
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    provider = OAuthClientProvider(
        server_url=server.mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="Gatehouse e2e client",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    try:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30, transport=transport) as http,
            Client(streamable_http_client(server.mcp_url, http_client=http), mode=mode) as client,
        ):
            yield client, storage
    finally:
        await browser.aclose()


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
        self, *, client_id: str, challenge: str | None, method: str | None = "S256", **extra: str
    ) -> str:
        params = {
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
        return f"/oauth/authorize/?{urlencode(params)}"

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

    async def code_for(self, person: Person, *, client_id: str | None = None) -> tuple[str, str, str]:
        """Run the browser part; return (client_id, code, verifier)."""
        client_id = client_id or await self.register()
        verifier, challenge = pkce_pair()
        browser = Browser(self.server.base_url)
        try:
            response = await browser.authorize(
                self.authorize_url(client_id=client_id, challenge=challenge),
                username=person.username,
                password=person.password,
                tenant=person.tenant,
            )
        finally:
            await browser.aclose()
        return client_id, redirect_params(response)["code"], verifier

    async def token_for(self, person: Person) -> dict[str, Any]:
        client_id, code, verifier = await self.code_for(person)
        response = await self.exchange(client_id=client_id, code=code, verifier=verifier)
        assert response.status_code == 200, response.text
        return {**response.json(), "client_id": client_id}


MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def initialize_body(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-http", "version": "1"},
        },
    }


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages in an SSE (or plain JSON) MCP response."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


class RawMcp:
    """Raw Streamable HTTP requests, for what the SDK client hides: headers, ids, status codes."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.http = httpx.AsyncClient(timeout=15)
        self.next_id = 1

    async def aclose(self) -> None:
        await self.http.aclose()

    def headers(self, session_id: str | None = None, **extra: str) -> dict[str, str]:
        headers = {
            **MCP_HEADERS,
            "authorization": f"Bearer {self.token}",
            "mcp-protocol-version": "2025-11-25",
        }
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        return {**headers, **extra}

    async def initialize(self, url: str, *, client_name: str = "raw-http") -> str:
        body = initialize_body()
        body["params"]["clientInfo"] = {"name": client_name, "version": "9.9"}
        response = await self.http.post(
            url, json=body, headers={**MCP_HEADERS, "authorization": f"Bearer {self.token}"}
        )
        assert response.status_code == 200, response.text
        session_id = response.headers["mcp-session-id"]
        notified = await self.http.post(
            url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=self.headers(session_id),
        )
        assert notified.status_code == 202, notified.text
        return session_id

    async def request(
        self, url: str, method: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> httpx.Response:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        return await self.http.post(url, json=body, headers=self.headers(**kw))

    async def result(
        self, url: str, method: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> dict[str, Any]:
        response = await self.request(url, method, params, **kw)
        assert response.status_code == 200, response.text
        (message,) = [m for m in sse_messages(response) if "id" in m]
        assert "result" in message, message
        return dict(message["result"])


async def access_token(server: DaphneServer, person: Person) -> str:
    """A token for the person, through registration, the browser pages and the token endpoint."""
    driver = OAuthDriver(server)
    try:
        return str((await driver.token_for(person))["access_token"])
    finally:
        await driver.aclose()

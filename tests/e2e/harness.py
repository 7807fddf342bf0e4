"""Real parts for end-to-end tests: a Daphne subprocess, a person's browser, an OAuth client."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urljoin, urlsplit

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
E2E_RATE_LIMIT_PREFIX = "gatehouse-e2e-" + secrets.token_hex(6)


def _data_source_key() -> str:
    from core.crypto import encryption_key

    return encryption_key()


def free_port() -> int:
    """A port nothing listens on at this moment: for an address that must refuse connections. A
    server a test starts gets ``listening_socket`` instead, which keeps the port from then on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Twisted's own default, which Daphne listened with when it bound its port itself.
LISTEN_BACKLOG = 50


def listening_socket(port: int = 0) -> socket.socket:
    """A socket listening on 127.0.0.1 (on ``port``, or one the kernel picks), for a server process
    to adopt (``pass_fds``). A port probed free and let go for the server to bind later may be
    taken in between by any other process of a busy machine; this one is never let go."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # A server started again on its port takes it back while its killed predecessor's
        # connections linger in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def serving_wait(
    process: subprocess.Popen[bytes],
    url: str,
    *,
    name: str,
    log: Callable[[], str],
    timeout: float = 60,
    ready: Callable[[httpx.Response], bool] = lambda response: True,
) -> None:
    """Wait until ``url`` answers as ``ready`` wants. The process serves a socket bound before it
    started (``listening_socket``), so a request waits in its queue until the server takes it, and
    fails at once if the process dies, its socket (the only copy) closing with it."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited early:\n{log()}")
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{name} did not become ready:\n{log()}")
        try:
            if ready(httpx.get(url, timeout=httpx.Timeout(5, read=left))):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)


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
        self._listener: socket.socket | None = listening_socket()
        self.port = int(self._listener.getsockname()[1])
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.mcp_url = f"{self.base_url}/mcp"
        # Several processes behind one load balancer share one public URL.
        self.public_url = public_url or self.base_url
        self.resource_url = f"{self.public_url}/mcp"
        self.log_path = log_path
        # Where the server's email goes, as files (Django's filebased backend) a test reads
        # (tests/e2e/browser/test_password_reset_page.py).
        self.mail_dir = log_path.parent / "mail"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DEBUG": "false",
            "SECRET_KEY": E2E_SECRET_KEY,
            "PORT": str(self.port),
            "PUBLIC_URL": self.public_url,
            "PYTHONUNBUFFERED": "1",
            # Tests switch toolsets between requests; a cached answer would leak into the next test.
            "MCP_TOOLSET_CACHE_SECONDS": "0",
            "RATE_LIMIT_RULE_CACHE_SECONDS": "0",
            # The test process (demo bootstrap, factories) encrypts data source URLs under its own
            # SECRET_KEY; the servers must read them, as every replica shares one key.
            "DATA_SOURCE_ENCRYPTION_KEY": _data_source_key(),
            # Every server of a run shares one Redis namespace (as replicas do), and no other run's.
            # Defaults that a whole suite from one address would trip are lifted; tests of the
            # limits themselves set RateLimitRule rows, which win over defaults.
            "REDIS_URL": os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
            "RATE_LIMIT_KEY_PREFIX": E2E_RATE_LIMIT_PREFIX,
            "RATE_LIMIT_TOOL": "none",
            "RATE_LIMIT_TOOL_EXPENSIVE": "none",
            "RATE_LIMIT_RESOURCE_READ": "none",
            "RATE_LIMIT_AUTHORIZE": "none",
            "RATE_LIMIT_LOGIN": "none",
            "RATE_LIMIT_REGISTER": "none",
            # A module's tests open many sessions as the same demo person and end few of them
            # (tests/mcp_gateway/test_sessions_per_person.py tests the bound itself).
            "MCP_SESSIONS_PER_PERSON": "1000000",
            # Each test looks for its own refusal's row: with counting on, a refusal of the same key
            # by another test earlier in the minute would hold it back. The counting has its own
            # server (tests/e2e/audit/test_audit_no_call_missing.py).
            "AUDIT_REFUSAL_WINDOW_SECONDS": "0",
            # Audit rows the database cannot take wait here (core.audit.spool), not in the checkout.
            "AUDIT_SPOOL_DIR": str(log_path.parent / "audit-spool"),
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": str(self.mail_dir),
            **(extra_env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def listening_fd(self) -> int:
        """The descriptor of the socket the process serves, the same number in the process
        (``pass_fds``); a server started again (after ``kill`` or ``stop``) binds its port anew."""
        if self._listener is None:
            self._listener = listening_socket(self.port)
        return self._listener.fileno()

    def _listener_close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "daphne",
            # Daphne's own access log is plain text and keeps query strings; Gatehouse writes its own.
            "-v",
            "0",
            "--fd",
            str(self.listening_fd),
            "config.asgi:application",
        ]

    def start(self) -> None:
        try:
            with self.log_path.open("wb") as log:
                self.process = subprocess.Popen(
                    self.command(),
                    cwd=BASE_DIR,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(self.listening_fd,),
                )
        finally:
            # The process holds the only copy now: once it dies, its port refuses connections, as
            # a dead server's does, instead of queueing them for nobody.
            self._listener_close()
        serving_wait(
            self.process,
            f"{self.base_url}/.well-known/oauth-authorization-server",
            name="Daphne",
            log=self.log,
            ready=lambda response: response.status_code == 200,
        )

    def kill(self) -> None:
        """Die the hard way, as a crashed or OOM-killed worker would."""
        self._listener_close()
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        self._listener_close()
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


def parse_form(html: str, *, action: str | None = None) -> dict[str, Any]:
    """The page's last form, or its first one posting to ``action``."""
    parser = _FormParser()
    parser.feed(html)
    forms = [form for form in parser.forms if action is None or form["action"] == action]
    assert forms, f"no form{f' posting to {action}' if action else ''} on the page:\n{html[:2000]}"
    return forms[0] if action is not None else forms[-1]


class Browser:
    """A person's browser: cookies, login form, consent form. It never follows the final redirect."""

    def __init__(
        self, base_url: str, *, transport: httpx.AsyncBaseTransport | None = None, patient: bool = False
    ) -> None:
        self.base_url = base_url
        # A patient person waits out a rate limit's refusal (429) and tries again, as a person
        # signing in several times a minute against the default limits (a newcomer's make run) does.
        self.patient = patient
        self.client = httpx.AsyncClient(
            base_url=base_url, follow_redirects=False, timeout=30, transport=transport
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _get(self, url: str) -> httpx.Response:
        response = await self.client.get(url)
        for _ in range(3 if self.patient else 0):
            if response.status_code != 429:
                break
            await asyncio.sleep(min(65, int(response.headers.get("Retry-After", "60")) + 1))
            response = await self.client.get(url)
        return response

    async def open(self, url: str, *, username: str, password: str) -> httpx.Response:
        """GET the authorization URL, signing in on the way if asked to."""
        response = await self._get(url)
        if response.status_code == 302 and urlsplit(response.headers["location"]).path == "/accounts/login/":
            login_url = urljoin(self.base_url, response.headers["location"])
            for _ in range(4 if self.patient else 1):
                page = await self.client.get(login_url)
                form = parse_form(page.text)
                fields = {**form["fields"], "username": username, "password": password}
                signed_in = await self.client.post(login_url, data=fields)
                if signed_in.status_code != 429 or not self.patient:
                    break
                await asyncio.sleep(min(65, int(signed_in.headers.get("Retry-After", "60")) + 1))
            assert signed_in.status_code == 302, (
                f"login failed: {signed_in.status_code}\n{signed_in.text[:500]}"
            )
            response = await self._get(urljoin(self.base_url, signed_in.headers["location"]))
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


# What an acme admin sees in the demo: the account tools and the data agent, which the demo turns
# on for acme.
# The demo turns the workflows toolset on for acme: a viewer holds every workflow scope but
# workflows:agent (invoke_agent).
VIEWER_WORKFLOW_TOOLS = [
    "initialize",
    "get_workflow_info",
    "get_commands",
    "execute_command",
    "invoke_assistant",
    "new_conversation",
    "list_conversations",
    "activate_conversation",
    "post_feedback",
]
# The demo turns the research toolset on for acme and globex: a viewer (mcp:read) may follow and
# export searches, not start or decide them.
VIEWER_RESEARCH_TOOLS = ["get_session", "export_results"]
RESEARCH_TOOLS = {*VIEWER_RESEARCH_TOOLS, "search_papers", "decide", "cancel_session"}
ACME_VIEWER_TOOLS = ["whoami", "get_data_preferences", *VIEWER_WORKFLOW_TOOLS, *VIEWER_RESEARCH_TOOLS]
ACME_VIEWER_SCOPE = "mcp:read ontologies:read workflows:read workflows:run"
# What globex's people see of the demo's upstream MCP server (bootstrap_demo registers it; it asks
# only for mcp:read, so every role sees them).
GLOBEX_DEMO_TOOLS = {"demo_convert_units", "demo_roll_dice", "demo_word_count"}
ACME_ADMIN_TOOLS = {
    "whoami",
    "set_display_name",
    "ask_question",
    "run_query",
    "get_data_preferences",
    "set_data_preferences",
    *VIEWER_WORKFLOW_TOOLS,
    "invoke_agent",
    *RESEARCH_TOOLS,
}


@dataclass
class Person:
    username: str
    password: str = DEMO_PASSWORD
    tenant: str | None = None
    logins: int = 0
    # Waits out the server's sign-in rate limits instead of failing (Browser's ``patient``).
    patient: bool = False


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


class ServerAddress(Protocol):
    """Where a server answers: a DaphneServer here, or one `make run` started."""

    @property
    def base_url(self) -> str: ...

    @property
    def mcp_url(self) -> str: ...


@asynccontextmanager
async def sdk_client(
    server: ServerAddress,
    person: Person,
    *,
    mode: str = "legacy",
    storage: MemoryTokenStorage | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    browser: Browser | None = None,
    client_metadata_url: str | None = None,
    **client_options: Any,
) -> AsyncIterator[tuple[Client, MemoryTokenStorage]]:
    """The official SDK client with its OAuthClientProvider; the person consents in the browser
    (``browser``, if the test brings its own, is the test's to close). With ``client_metadata_url``
    the client identifies itself by that client ID metadata document instead of registering."""
    storage = storage or MemoryTokenStorage()
    own_browser = browser is None
    browser = browser or Browser(server.base_url, patient=person.patient)
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
        client_metadata_url=client_metadata_url,
    )
    try:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30, transport=transport) as http,
            Client(
                streamable_http_client(server.mcp_url, http_client=http), mode=mode, **client_options
            ) as client,
        ):
            yield client, storage
    finally:
        if own_browser:
            await browser.aclose()

"""A browser MCP client on another origin, in real headless Chromium: what the MCP Inspector's UI
does, by cross-origin fetch from its own page (``cross_origin_client/client.js``), against a
Gatehouse under Daphne whose ``MCP_ALLOWED_ORIGINS`` names that page's origin.

The allowed page discovers, reads the 401's challenge, registers, sends the person through the real
sign-in and consent pages, and, back on its own origin, exchanges the code for a token, initializes
an MCP session (reading its id) and lists the tools. A page from an origin Gatehouse does not allow
reads the public discovery documents and nothing else: the browser rejects every other fetch.

Gatehouse is served as ``http://gatehouse.test:<port>`` (Chromium maps the name to loopback), a
public host as far as it knows, so its development rule (any loopback origin, on a loopback
server) is out of play and only the setting decides. The page is served on loopback, as the
Inspector is (``localhost``: a secure context for PKCE's SHA-256, and a redirect URI plain http may
use); ``localhost`` and ``127.0.0.1`` are two origins of one static server.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from tests.e2e.browser.conftest import GATEHOUSE_HOST
from tests.e2e.browser.pages import sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD, DaphneServer, free_port

pytestmark = pytest.mark.django_db

CLIENT_FILES = Path(__file__).parent / "cross_origin_client"
REPORT_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class ClientSite:
    port: int

    @property
    def allowed_origin(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def foreign_origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def client_site() -> Iterator[ClientSite]:
    """The client's static page, served from 127.0.0.1 (so as localhost too)."""
    handler = functools.partial(_QuietHandler, directory=str(CLIENT_FILES))
    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield ClientSite(port=httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def cors_server(database_url, tmp_path_factory, client_site) -> Iterator[DaphneServer]:
    log_path = Path(tmp_path_factory.mktemp("daphne")) / "cors.log"
    server = DaphneServer(
        database_url=database_url,
        log_path=log_path,
        extra_env={"MCP_ALLOWED_ORIGINS": client_site.allowed_origin},
    )
    # Its public URL names the port it was given, on a host only the browser resolves.
    server.public_url = f"http://{GATEHOUSE_HOST}:{server.port}"
    server.resource_url = f"{server.public_url}/mcp"
    server.env["PUBLIC_URL"] = server.public_url
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def page(chromium) -> AsyncIterator[Page]:
    async with chromium.new_context() as context:
        yield await context.new_page()


async def _report(page: Page) -> dict[str, dict[str, Any]]:
    await page.wait_for_function("Array.isArray(window.report)", timeout=REPORT_TIMEOUT_MS)
    return {entry["step"]: entry for entry in await page.evaluate("window.report")}


def _json(entry: dict[str, Any]) -> Any:
    assert "error" not in entry, entry
    body = entry["body"]
    if body.lstrip().startswith("{"):
        return json.loads(body)
    return json.loads([line for line in body.splitlines() if line.startswith("data:")][-1][5:])


async def test_a_page_on_an_allowed_origin_signs_in_and_calls_tools(page, cors_server, client_site):
    server_url = cors_server.public_url
    await page.goto(f"{client_site.allowed_origin}/index.html?server={server_url}")

    # The page registered a client and sent the browser to sign in, on Gatehouse's own origin.
    try:
        await page.wait_for_url(f"{server_url}/accounts/login/**", timeout=REPORT_TIMEOUT_MS)
    except PlaywrightTimeoutError:
        pytest.fail(f"the page never sent the browser to sign in: {await _report(page)}")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await page.get_by_role("button", name="Allow").click()
    report = await _report(page)

    assert page.url.startswith(f"{client_site.allowed_origin}/callback.html?")
    assert _json(report["resource-metadata"])["resource"] == cors_server.resource_url
    assert _json(report["server-metadata"])["issuer"] == server_url
    assert report["openid-configuration"].get("status") == 404, report["openid-configuration"]
    unauthenticated = report["unauthenticated"]
    assert unauthenticated.get("status") == 401, unauthenticated
    challenge = unauthenticated["headers"]["www-authenticate"]
    assert f'resource_metadata="{server_url}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert report["registration"].get("status") == 201, report["registration"]
    assert report["token"].get("status") == 200, report["token"]
    assert _json(report["token"])["token_type"] == "Bearer"
    initialized = report["initialize"]
    assert initialized.get("status") == 200, initialized
    session_id = initialized["headers"]["mcp-session-id"]
    assert session_id
    assert _json(initialized)["result"]["serverInfo"]["name"] == "gatehouse"
    assert report["initialized"].get("status") == 202, report["initialized"]
    listed = report["tools/list"]
    assert listed.get("status") == 200, listed
    assert "whoami" in {tool["name"] for tool in _json(listed)["result"]["tools"]}


async def test_a_page_on_another_origin_reads_discovery_and_nothing_else(page, cors_server, client_site):
    await page.goto(f"{client_site.foreign_origin}/index.html?server={cors_server.public_url}&probe=1")
    report = await _report(page)

    # Discovery documents are public: any origin may read them.
    assert _json(report["resource-metadata"])["resource"] == cors_server.resource_url
    assert _json(report["server-metadata"])["issuer"] == cors_server.public_url
    # Everything else the browser refuses to hand the page: fetch rejects.
    for step in ("unauthenticated", "registration", "token"):
        assert report[step].get("error", "").startswith("TypeError"), report[step]

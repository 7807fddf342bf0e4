"""The strict Content-Security-Policy in real Chromium: the pages people use break none of it, and
the authorization flow still reaches the client, whose redirect Chromium checks against
``form-action`` (the redirect after the consent form, and after the sign-in form when consent was
given before).

Unlike the other browser tests, nothing here catches the redirect to the client: the browser
follows it to a real little server, as it would to a desktop client's loopback listener.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.async_api import Browser, Page, expect

from tests.e2e.browser.pages import sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD
from tests.e2e.oauth_driver import pkce_pair
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

CLIENT_HEADING = "Back at the client"


class _Callback(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"<!doctype html><title>Client</title><h1>{CLIENT_HEADING}</h1>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def client_listener() -> Iterator[str]:
    """A desktop client's loopback listener: its redirect URI."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Callback)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/callback"
    finally:
        server.shutdown()
        server.server_close()


class PolicyWatch:
    """Every CSP violation Chromium reports on the pages of one browser context."""

    def __init__(self) -> None:
        self.violations: list[str] = []

    def watch(self, page: Page) -> Page:
        page.on(
            "console",
            lambda message: (
                self.violations.append(message.text) if "Content Security Policy" in message.text else None
            ),
        )
        return page


@pytest.fixture
async def chromium_browser(server, chromium) -> AsyncIterator[Browser]:
    # Chromium drops a connection's contexts when it ends, so none outlives its test.
    async with chromium.connect() as browser:
        yield browser


async def _fresh_page(browser: Browser, server, watch: PolicyWatch) -> Page:
    """A page in a profile of its own: no cookies, so no session."""
    context = await browser.new_context(base_url=server.base_url, viewport={"width": 900, "height": 700})
    return watch.watch(await context.new_page())


def _authorize_url(driver, *, client_id: str, redirect_uri: str, state: str) -> str:
    _, challenge = pkce_pair()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "mcp:read mcp:write",
        "state": state,
        "resource": driver.server.resource_url,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return f"/oauth/authorize/?{urlencode(params)}"


async def _arrived(page: Page, redirect_uri: str) -> dict[str, str]:
    await expect(page.get_by_role("heading", name=CLIENT_HEADING)).to_be_visible()
    assert page.url.startswith(redirect_uri), page.url
    return {key: values[0] for key, values in parse_qs(urlsplit(page.url).query).items()}


async def test_allowing_on_the_consent_page_reaches_the_client_s_loopback_listener(
    chromium_browser, server, driver, client_listener
):
    watch = PolicyWatch()
    client_id = await driver.register(redirect_uris=[client_listener])
    state = secrets.token_urlsafe(8)
    page = await _fresh_page(chromium_browser, server, watch)
    await page.goto(_authorize_url(driver, client_id=client_id, redirect_uri=client_listener, state=state))
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await page.get_by_role("button", name="Allow").click()

    params = await _arrived(page, client_listener)
    assert params["state"] == state
    assert "code" in params
    assert watch.violations == []

    # Consent given, a new sign-in goes straight from the sign-in form to the client.
    again = await _fresh_page(chromium_browser, server, watch)
    await again.goto(_authorize_url(driver, client_id=client_id, redirect_uri=client_listener, state=state))
    await sign_in_by_keyboard(again, username="alice", password=DEMO_PASSWORD)
    assert "code" in await _arrived(again, client_listener)
    assert watch.violations == []


async def test_the_admin_and_the_connected_apps_page_break_no_policy(chromium_browser, server, committed):
    watch = PolicyWatch()
    operator = committed(UserFactory, username="csp-operator", is_staff=True, is_superuser=True)
    page = await _fresh_page(chromium_browser, server, watch)
    await page.goto("/admin/login/?next=/admin/")
    await page.get_by_label("Username").fill(operator.username)
    await page.get_by_label("Password").fill(DEFAULT_PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("button", name="Log out")).to_be_visible()
    # The audit trail's list has the admin's filters and our own text filter.
    await page.goto("/admin/core/auditevent/")
    await expect(page.locator("#changelist-filter")).to_be_visible()
    await page.goto("/accounts/connected/")
    await expect(page.locator("main")).to_be_visible()
    assert watch.violations == []

"""Real headless Chromium (Debian's ``chromium``) driven by Playwright, against the Daphne server.

Playwright's own browser download is never used: the browser is the system one, at
``CHROMIUM_PATH`` (default ``/usr/bin/chromium``; ``make browsers`` installs it). A missing browser
fails these tests with that instruction rather than skipping them. Screenshots of every page a
test looks at go to ``$GATEHOUSE_ARTIFACTS_DIR/screenshots`` (default ``.ci/artifacts``,
git-ignored), which CI keeps as an artifact.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.async_api import Page, Route, ViewportSize, async_playwright, expect

from tests.e2e.harness import BASE_DIR, REDIRECT_URI

CHROMIUM_PATH = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
ARTIFACTS_DIR = Path(os.environ.get("GATEHOUSE_ARTIFACTS_DIR", BASE_DIR / ".ci" / "artifacts"))
SCREENSHOTS_DIR = ARTIFACTS_DIR / "screenshots"
_CLIENT_ORIGIN = "{0.scheme}://{0.netloc}".format(urlsplit(REDIRECT_URI))
CLIENT_HEADING = "Back at the client"
_CLIENT_PAGE = f"<!doctype html><title>Client</title><h1>{CLIENT_HEADING}</h1>"


@dataclass
class BrowserTab:
    """One page of a fresh browser profile, and where the server sent it back to the OAuth client.

    The client's redirect URI (``127.0.0.1:9``) has nothing listening: the server's redirect there
    is caught before the browser follows it, and the page is told it arrived, so the code or error
    it carries can be read and nothing is loaded from the client's address."""

    page: Page
    base_url: str
    arrivals: list[str] = field(default_factory=list)

    async def screenshot(self, name: str) -> Path:
        SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS_DIR / f"{name}.png"
        await self.page.screenshot(path=str(path), full_page=True)
        return path

    async def arrival_params(self) -> dict[str, str]:
        """The query the server sent the browser back to the client with (after waiting for it)."""
        await expect(self.page.get_by_role("heading", name=CLIENT_HEADING)).to_be_visible()
        assert len(self.arrivals) == 1, self.arrivals
        return {key: values[0] for key, values in parse_qs(urlsplit(self.arrivals[0]).query).items()}


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM_PATH.exists():
        pytest.fail(
            f"Chromium is not installed at {CHROMIUM_PATH}: run `make browsers` (apt-get install chromium) "
            "or set CHROMIUM_PATH. The browser tests never skip.",
            pytrace=False,
        )
    return CHROMIUM_PATH


# The people's pages are narrow; the admin is checked at a common laptop size, where its list of
# the audit trail must fit without scrolling sideways.
NARROW: ViewportSize = {"width": 900, "height": 700}
WIDE: ViewportSize = {"width": 1280, "height": 800}


@asynccontextmanager
async def _open_tab(server, chromium_path: Path, viewport: ViewportSize) -> AsyncIterator[BrowserTab]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(chromium_path), headless=True)
        try:
            context = await browser.new_context(base_url=server.base_url, viewport=viewport)
            page = await context.new_page()
            tab = BrowserTab(page=page, base_url=server.base_url)

            async def decide(route: Route) -> None:
                # Playwright's routes never see a redirect's target, so the consent POST is made
                # here, without following, and a redirect to the client is answered in its place.
                if route.request.method != "POST":
                    await route.continue_()
                    return
                response = await route.fetch(max_redirects=0)
                location = response.headers.get("location", "")
                if response.status in {302, 303} and location.startswith(_CLIENT_ORIGIN):
                    tab.arrivals.append(location)
                    await route.fulfill(status=200, content_type="text/html", body=_CLIENT_PAGE)
                else:
                    await route.fulfill(response=response)

            await page.route(f"{server.base_url}/oauth/authorize/**", decide)
            yield tab
            await context.close()
        finally:
            await browser.close()


@pytest.fixture
async def tab(server, chromium_path) -> AsyncIterator[BrowserTab]:
    async with _open_tab(server, chromium_path, NARROW) as tab:
        yield tab


@pytest.fixture
async def wide_tab(server, chromium_path) -> AsyncIterator[BrowserTab]:
    async with _open_tab(server, chromium_path, WIDE) as tab:
        yield tab

"""Real headless Chromium (Debian's ``chromium``) driven by Playwright, against the Daphne server.

Playwright's own browser download is never used: the browser is the system one, at
``CHROMIUM_PATH`` (default ``/usr/bin/chromium``; ``make browsers`` installs it). A missing browser
fails these tests with that instruction rather than skipping them. Screenshots of every page a
test looks at go to ``$GATEHOUSE_ARTIFACTS_DIR/screenshots`` (default ``.ci/artifacts``,
git-ignored), which CI keeps as an artifact.

One Chromium serves the whole session (starting one per test cost most of a second each); every test
gets a browser context of its own, with its own cookies and storage, as a fresh profile has. Each
test runs on its own event loop, where a Playwright object from another loop cannot be used, so the
browser is a plain process here and each test connects to it over the DevTools protocol.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.async_api import Browser, BrowserContext, Page, Route, ViewportSize, async_playwright, expect

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


# What Playwright passes when it launches Chromium itself (playwright-core 1.65's chromiumSwitches.ts
# and its headless switches, less those for Windows, macOS and Edge), so pages behave and look as
# they did when each test launched its own: with a bare --headless a page loses 15 pixels to a
# scrollbar (the admin's audit list is laid out and measured at 1280), matches neither
# (hover: hover) nor (pointer: fine), and screenshots differ. The rest keep a page of one context
# running at full speed while another is busy, and the browser from calling Google's services.
_LAUNCH_SWITCHES = (
    "--disable-field-trial-config",
    "--disable-background-networking",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-back-forward-cache",
    "--disable-breakpad",
    "--disable-component-extensions-with-background-pages",
    "--disable-component-update",
    "--no-default-browser-check",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-features=AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,HttpsUpgrades,"
    "HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,ThirdPartyStoragePartitioning,"
    "AvoidCorsURLLoaderRestartOnRedirect,OptimizationHints,NetworkTimeServiceQuerying,AimEnabled,"
    "PreconnectToSearch",
    "--enable-features=CDPScreenshotNewSurface,SkipListAccountsWithoutGaiaCookies",
    "--allow-pre-commit-input",
    "--disable-hang-monitor",
    "--disable-ipc-flooding-protection",
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--disable-renderer-backgrounding",
    "--force-color-profile=srgb",
    "--metrics-recording-only",
    "--no-first-run",
    "--password-store=basic",
    "--use-mock-keychain",
    "--no-service-autorun",
    "--disable-search-engine-choice-screen",
    "--unsafely-disable-devtools-self-xss-warnings",
    "--enable-unsafe-swiftshader",
    "--disable-stack-profiler",
    "--disable-infobars",
    "--disable-sync",
    "--headless",
    "--hide-scrollbars",
    "--mute-audio",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,availablePointerTypes=4",
    "--no-sandbox",
    "--no-startup-window",
)
# A host only this browser resolves (to loopback): test_cross_origin_client serves Gatehouse there,
# under a name Gatehouse's development rule for loopback origins does not cover. The switch is the
# whole browser's, so it is set for the session.
GATEHOUSE_HOST = "gatehouse.test"
CHROMIUM_START_SECONDS = 30


@dataclass(frozen=True)
class Chromium:
    """The session's Chromium: where its DevTools protocol answers, and what it printed."""

    path: Path
    process: subprocess.Popen[bytes]
    ws_url: str
    log_path: Path

    def exited(self) -> str | None:
        """Why no test can use the browser any more, or None while it runs."""
        code = self.process.poll()
        if code is None:
            return None
        log = self.log_path.read_text(errors="replace")[-4000:]
        return f"Chromium ({self.path}) exited with code {code}; its output:\n{log}"

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Browser]:
        """Playwright on this test's event loop, connected to the browser; disconnecting makes
        Chromium drop every context the connection made."""
        if (reason := self.exited()) is not None:
            pytest.fail(reason, pytrace=False)
        try:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.connect_over_cdp(self.ws_url)
                try:
                    yield browser
                finally:
                    await browser.close()
        except Exception as error:
            # Playwright only says the target closed; the browser's own output says why.
            if (reason := self.exited()) is not None:
                error.add_note(reason)
            raise

    @asynccontextmanager
    async def new_context(self, **options: Any) -> AsyncIterator[BrowserContext]:
        async with self.connect() as browser:
            context = await browser.new_context(**options)
            try:
                yield context
            finally:
                await context.close()


def _devtools_url(path: Path, process: subprocess.Popen[bytes], profile: Path, log_path: Path) -> str:
    """The browser's DevTools address, from the file Chromium writes into its profile for tools to
    find it (the port it picked, then the path)."""
    active_port = profile / "DevToolsActivePort"
    deadline = time.monotonic() + CHROMIUM_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"Chromium ({path}) exited with code {process.returncode} as it started; "
                f"its output:\n{log_path.read_text(errors='replace')}",
                pytrace=False,
            )
        lines = active_port.read_text().splitlines() if active_port.exists() else []
        if len(lines) >= 2 and lines[1].startswith("/devtools/browser/"):
            return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        time.sleep(0.05)
    pytest.fail(
        f"Chromium ({path}) did not open its DevTools port in {CHROMIUM_START_SECONDS} s; "
        f"its output:\n{log_path.read_text(errors='replace')}",
        pytrace=False,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    # The browser's zygotes and renderers share its process group (its own session): none may
    # outlive the run, even when the browser itself is gone or will not go.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="session")
def chromium(chromium_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    directory = tmp_path_factory.mktemp("chromium")
    profile = directory / "profile"
    log_path = directory / "chromium.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                str(chromium_path),
                *_LAUNCH_SWITCHES,
                f"--host-resolver-rules=MAP {GATEHOUSE_HOST} 127.0.0.1",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        ws_url = _devtools_url(chromium_path, process, profile, log_path)
        yield Chromium(path=chromium_path, process=process, ws_url=ws_url, log_path=log_path)
    finally:
        _stop(process)


# The people's pages are narrow; the admin is checked at a common laptop size, where its list of
# the audit trail must fit without scrolling sideways.
NARROW: ViewportSize = {"width": 900, "height": 700}
WIDE: ViewportSize = {"width": 1280, "height": 800}


@asynccontextmanager
async def open_tab(server, chromium: Chromium, viewport: ViewportSize) -> AsyncIterator[BrowserTab]:
    async with chromium.new_context(base_url=server.base_url, viewport=viewport) as context:
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


@pytest.fixture
async def tab(server, chromium) -> AsyncIterator[BrowserTab]:
    async with open_tab(server, chromium, NARROW) as tab:
        yield tab


@pytest.fixture
async def wide_tab(server, chromium) -> AsyncIterator[BrowserTab]:
    async with open_tab(server, chromium, WIDE) as tab:
        yield tab

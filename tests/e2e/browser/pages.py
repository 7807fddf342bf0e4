"""What a person does in the browser, by keyboard only, shared by the browser tests."""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage
from pathlib import Path

from playwright.async_api import ConsoleMessage, Locator, Page, expect

from tests.e2e.oauth_driver import OAuthDriver, pkce_pair

# What Django's filebased email backend writes after each message.
_MAIL_SEPARATOR = b"\n" + b"-" * 79 + b"\n"

# Far more Tab presses than any of these pages has controls: reaching the target within this
# many proves it is in the tab order, without pinning down every control the page may gain.
MAX_TABS = 15


async def tab_to(page: Page, target: Locator, *, backwards: bool = False) -> None:
    """Press Tab (or Shift+Tab) until ``target`` has the focus; fail if it never gets it."""
    for _ in range(MAX_TABS):
        if await target.evaluate("element => element === document.activeElement"):
            return
        await page.keyboard.press("Shift+Tab" if backwards else "Tab")
    await expect(target).to_be_focused(timeout=1)


async def open_authorization(driver: OAuthDriver, page: Page) -> tuple[str, str, str]:
    """Register a fresh client and open its authorization URL; returns (client_id, verifier, state)."""
    client_id = await driver.register()
    verifier, challenge = pkce_pair()
    url = driver.authorize_url(client_id=client_id, challenge=challenge, state="browser-state")
    await page.goto(url)
    return client_id, verifier, "browser-state"


async def sign_in_by_keyboard(page: Page, *, username: str, password: str) -> None:
    """The login page opens with the focus in Username; Tab to Password; Enter submits."""
    username_box = page.get_by_label("Username")
    await expect(username_box).to_be_focused()
    await page.keyboard.press("Control+A")
    await page.keyboard.type(username)
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("Password")).to_be_focused()
    await page.keyboard.type(password)
    await page.keyboard.press("Enter")


def policy_violations(page: Page) -> list[str]:
    """Every Content-Security-Policy violation Chromium reports on ``page`` from now on."""
    violations: list[str] = []

    def note(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            violations.append(message.text)

    page.on("console", note)
    return violations


async def fits_the_viewport(page: Page) -> None:
    """The page is no wider than the window: nothing to scroll sideways."""
    widths = await page.evaluate(
        "() => ({viewport: window.innerWidth, document: document.documentElement.scrollWidth})"
    )
    assert widths["document"] <= widths["viewport"], widths


def emailed_links(mail_dir: Path, address: str, link: re.Pattern[str]) -> list[str]:
    """What ``link`` finds in the plain text of every message the server wrote to ``address`` so
    far (the test servers' email goes to files in ``mail_dir``: tests/e2e/harness.py)."""
    links: list[str] = []
    for path in sorted(mail_dir.glob("*.log")):
        for raw in path.read_bytes().split(_MAIL_SEPARATOR):
            message = email.message_from_bytes(raw, policy=email.policy.default)
            if not isinstance(message, EmailMessage) or message["To"] != address:
                continue
            body = message.get_body(preferencelist=("plain",))
            if body is not None:
                links += link.findall(body.get_content())
    return links

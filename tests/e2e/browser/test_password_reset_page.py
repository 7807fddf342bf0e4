"""Password reset in real headless Chromium against Daphne: a person who forgot her password asks
for a link from the sign-in page, the test reads the email the server wrote (Django's filebased
backend, ``DaphneServer.mail_dir``), the browser follows its link, sets a new password and signs in
with it; on a laptop's width and a phone's, breaking none of the Content-Security-Policy.

What the pages answer to unknown addresses, floods, hostile input and expired or used links:
tests/portal/test_password_reset.py."""

from __future__ import annotations

import email
import email.policy
import re
import secrets
from email.message import EmailMessage
from pathlib import Path

import pytest
from playwright.async_api import ViewportSize, expect

from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.support.factories import UserFactory
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db

PHONE: ViewportSize = {"width": 390, "height": 844}
NEW_PASSWORD = "a-new-and-longer-passphrase-42"
# What Django's filebased backend writes after each message.
_SEPARATOR = b"\n" + b"-" * 79 + b"\n"
_LINK = re.compile(r"^(https?://\S+/accounts/password-reset/[^/\s]+/[^/\s]+/)$", re.MULTILINE)


def _reset_links(mail_dir: Path, address: str) -> list[str]:
    """The reset link of every message the server wrote to ``address`` so far."""
    links = []
    for path in sorted(mail_dir.glob("*.log")):
        for raw in path.read_bytes().split(_SEPARATOR):
            message = email.message_from_bytes(raw, policy=email.policy.default)
            if not isinstance(message, EmailMessage) or message["To"] != address:
                continue
            body = message.get_body(preferencelist=("plain",))
            if body is not None:
                links += _LINK.findall(body.get_content())
    return links


async def test_a_person_resets_her_password_from_the_emailed_link_and_signs_in_with_it(
    wide_tab, server, committed
):
    ivy = committed(UserFactory, username=f"ivy-{secrets.token_hex(3)}")
    page = wide_tab.page
    violations = policy_violations(page)
    await page.goto("/accounts/login/")

    await page.get_by_role("link", name="Forgot your password?").click()
    await expect(page.get_by_role("heading", name="Reset your password")).to_be_visible()
    await expect(page.get_by_label("Email")).to_be_focused()
    await fits_the_viewport(page)
    await wide_tab.screenshot("password-reset")
    await page.keyboard.type(ivy.email)
    await page.keyboard.press("Enter")

    await expect(page.get_by_role("heading", name="Check your email")).to_be_visible()
    await page.set_viewport_size(PHONE)
    await fits_the_viewport(page)
    await wide_tab.screenshot("password-reset-sent-phone")
    await eventually(
        lambda: bool(_reset_links(server.mail_dir, ivy.email)), within=10, what=f"an email to {ivy.email}"
    )
    [link] = _reset_links(server.mail_dir, ivy.email)
    assert link.startswith(f"{server.public_url}/accounts/password-reset/")

    await page.goto(link)
    await expect(page.get_by_role("heading", name="Choose a new password")).to_be_visible()
    # The token has left the address bar (Django keeps it in the session), so no Referer carries it.
    assert page.url.endswith("/set-password/")
    await fits_the_viewport(page)
    await wide_tab.screenshot("password-reset-choose-phone")
    await expect(page.get_by_label("New password", exact=True)).to_be_focused()
    await page.keyboard.type(NEW_PASSWORD)
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("New password again")).to_be_focused()
    await page.keyboard.type(NEW_PASSWORD)
    await page.keyboard.press("Enter")

    await expect(page.get_by_role("heading", name="Your password is changed")).to_be_visible()
    await fits_the_viewport(page)
    await page.get_by_role("link", name="Sign in").click()
    await sign_in_by_keyboard(page, username=ivy.username, password=NEW_PASSWORD)
    await expect(page.get_by_role("button", name=f"Sign out {ivy.username}")).to_be_visible()
    assert violations == []

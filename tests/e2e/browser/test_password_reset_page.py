"""Password reset in real headless Chromium against Daphne: a person who forgot her password asks
for a link from the sign-in page, the test reads the email the server wrote (Django's filebased
backend, ``DaphneServer.mail_dir``), the browser follows its link, sets a new password and signs in
with it; on a laptop's width and a phone's, breaking none of the Content-Security-Policy.

What the pages answer to unknown addresses, floods, hostile input and expired or used links:
tests/portal/test_password_reset.py."""

from __future__ import annotations

import re
import secrets

import pytest
from playwright.async_api import ViewportSize, expect

from tests.e2e.browser.pages import (
    emailed_links,
    fits_the_viewport,
    policy_violations,
    sign_in_by_keyboard,
)
from tests.support.factories import UserFactory
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db

PHONE: ViewportSize = {"width": 390, "height": 844}
NEW_PASSWORD = "a-new-and-longer-passphrase-42"
_LINK = re.compile(r"^(https?://\S+/accounts/password-reset/[^/\s]+/[^/\s]+/)$", re.MULTILINE)


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
        lambda: bool(emailed_links(server.mail_dir, ivy.email, _LINK)),
        within=10,
        what=f"an email to {ivy.email}",
    )
    [link] = emailed_links(server.mail_dir, ivy.email, _LINK)
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

"""Invitations in real headless Chromium against Daphne: a tenant admin invites a colleague from the
console's members page (reached through the old ``/accounts/members/`` address, which sends them
there), the test reads the email the server wrote (Django's filebased backend,
``DaphneServer.mail_dir``), a fresh browser profile follows its link, creates an account and lands
signed in as a member with the invited role; the link opened again is refused. On a laptop's width
and a phone's, breaking none of the Content-Security-Policy.

What the pages answer to other tenants' ids, viewers and hostile input:
tests/portal/test_console_members.py; to accounts of another address and tenants that require
their provider: tests/portal/test_members_pages.py."""

from __future__ import annotations

import re
import secrets

import pytest
from playwright.async_api import ViewportSize, expect

from tests.e2e.browser.conftest import NARROW, open_tab
from tests.e2e.browser.pages import (
    emailed_links,
    fits_the_viewport,
    policy_violations,
    sign_in_by_keyboard,
)
from tests.e2e.conftest import person_of
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db

PHONE: ViewportSize = {"width": 390, "height": 844}
PASSWORD = "a-long-and-unusual-passphrase-42"
_LINK = re.compile(r"^(https?://\S+/accounts/invitations/[A-Za-z0-9_-]{43}/)$", re.MULTILINE)


async def test_an_invited_colleague_creates_an_account_from_the_emailed_link_and_joins(
    wide_tab, server, chromium, own_admin
):
    admin = person_of(own_admin)
    tenant = own_admin.tenant.name
    newcomer = f"newcomer-{secrets.token_hex(3)}"
    address = f"{newcomer}@example.com"
    page = wide_tab.page
    violations = policy_violations(page)

    await page.goto("/accounts/login/?next=/accounts/members/")
    await sign_in_by_keyboard(page, username=admin.username, password=admin.password)
    await expect(page.get_by_role("heading", name="Members", exact=True)).to_be_visible()
    assert page.url.endswith(f"/console/{own_admin.tenant.slug}/members/")
    await expect(page.get_by_role("link", name="Members")).to_have_attribute("aria-current", "page")
    await page.get_by_label("Email").fill(address)
    await page.get_by_label("Role", exact=True).select_option("contributor")
    await page.get_by_role("button", name="Send invitation").click()

    await expect(page.get_by_role("status")).to_contain_text(f"An invitation was sent to {address}")
    invited = page.locator("table#invitations tbody tr")
    await expect(invited).to_have_count(1)
    await expect(invited).to_contain_text("contributor")
    await fits_the_viewport(page)
    await wide_tab.screenshot("members")
    await page.set_viewport_size(PHONE)
    await fits_the_viewport(page)
    await wide_tab.screenshot("members-phone")
    await eventually(
        lambda: bool(emailed_links(server.mail_dir, address, _LINK)), within=10, what=f"an email to {address}"
    )
    [link] = emailed_links(server.mail_dir, address, _LINK)
    assert link.startswith(f"{server.public_url}/accounts/invitations/")

    async with open_tab(server, chromium, NARROW) as colleague:
        visitor = colleague.page
        visitor_violations = policy_violations(visitor)
        await visitor.goto(link)
        await expect(visitor.get_by_role("heading", name=f"Join {tenant}")).to_be_visible()
        await expect(visitor.locator("#invitation")).to_contain_text(
            f"invited {address} to {tenant} as contributor"
        )
        await visitor.set_viewport_size(PHONE)
        await fits_the_viewport(visitor)
        await colleague.screenshot("invitation-phone")
        await visitor.get_by_label("Username").fill(newcomer)
        await visitor.get_by_label("Password", exact=True).fill(PASSWORD)
        await visitor.get_by_label("Password again").fill(PASSWORD)
        await visitor.get_by_role("button", name="Create the account and join").click()

        await expect(visitor.get_by_role("button", name=f"Sign out {newcomer}")).to_be_visible()
        await expect(visitor.locator("#tenants")).to_contain_text(f"{tenant}")
        await expect(visitor.locator("#tenants")).to_contain_text("you are contributor")
        assert visitor_violations == []

    # The link is used: opened again, by anyone else, it is refused.
    await page.goto(link)
    await expect(page.get_by_role("heading", name="This invitation cannot be used")).to_be_visible()
    await expect(page.get_by_role("alert")).to_contain_text("accepted already")
    await fits_the_viewport(page)
    assert violations == []

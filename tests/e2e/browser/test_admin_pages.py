"""The operators' admin in real headless Chromium at 1280x800, saved as screenshots for CI: the index
under Gatehouse's name with one OAuth section (and no ID tokens), and the audit trail's list, which
names each event's OAuth client and fits the screen without scrolling sideways, even with the
longest values an event can hold."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from config.admin_site import GatehouseAdminSite
from core.models import AuditAction, AuditOutcome
from tests.e2e.browser.conftest import WIDE
from tests.e2e.harness import Person, sdk_client
from tests.support.factories import DEFAULT_PASSWORD, ApplicationFactory, AuditEventFactory, UserFactory

pytestmark = pytest.mark.django_db

# The name the harness's client registers under; its audit rows should show it.
APPLICATION_NAME = "Gatehouse e2e client"


@pytest.fixture
def operator(committed):
    return committed(UserFactory, username="browser-operator", is_staff=True, is_superuser=True)


async def _sign_in_to_admin(page: Page, username: str, *, next_path: str) -> None:
    await page.goto(f"/admin/login/?next={next_path}")
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(DEFAULT_PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("button", name="Log out")).to_be_visible()


async def _widths(page: Page) -> dict[str, int]:
    # The admin wraps the list in a box that scrolls sideways on its own (``.results``), so the
    # page's width alone would not show a list that overflows: the box is measured too.
    return await page.evaluate(
        """() => {
            const box = document.querySelector('#changelist .results');
            return {
                viewport: window.innerWidth,
                document: document.documentElement.scrollWidth,
                table: Math.ceil(document.querySelector('#result_list').getBoundingClientRect().right),
                box_content: box.scrollWidth,
                box: box.clientWidth,
            };
        }"""
    )


async def test_the_admin_index_carries_gatehouse_s_name_and_one_oauth_section(wide_tab, operator):
    page = wide_tab.page
    await _sign_in_to_admin(page, operator.username, next_path="/admin/")

    await expect(page.locator("#site-name")).to_have_text(GatehouseAdminSite.site_header)
    assert GatehouseAdminSite.site_header.startswith("Gatehouse")
    await expect(page.get_by_role("heading", level=1)).to_have_text(GatehouseAdminSite.index_title)
    oauth = page.locator(
        "#content-main .module", has=page.get_by_role("link", name="OAuth grants and tokens")
    )
    await expect(oauth).to_have_count(1)
    for model in ("Applications", "Access tokens", "Refresh tokens"):
        await expect(oauth.get_by_role("link", name=model, exact=True)).to_be_visible()
    await expect(page.get_by_text("Django OAuth Toolkit")).to_have_count(0)
    await expect(page.get_by_text("Id tokens")).to_have_count(0)
    await wide_tab.screenshot("admin-index")


async def test_the_audit_list_names_the_client_and_fits_1280_pixels(wide_tab, server, operator, committed):
    # Real rows first: a client registers, is consented to, opens a session and calls a tool.
    person = Person("alice")
    async with sdk_client(server, person) as (client, _):
        assert not (await client.call_tool("whoami", {})).is_error
    # Then the widest an event can get: every text at its longest, with no space to wrap at.
    hostile = committed(ApplicationFactory, name="C" * 255)
    committed(
        AuditEventFactory,
        action=AuditAction.SESSION_REFUSED,
        outcome=AuditOutcome.DENIED,
        username="u" * 150,
        application=hostile,
        client_id=hostile.client_id,
        target="t" * 500,
        ip="2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
        request_id="r" * 128,
        duration_ms=123456.789,
    )
    page = wide_tab.page
    await _sign_in_to_admin(page, operator.username, next_path="/admin/core/auditevent/")

    results = page.locator("#result_list")
    headers = await results.locator("thead th").all_inner_texts()
    assert "CLIENT" in [header.strip().upper() for header in headers]
    called = results.locator("tbody tr", has_text="Tool called")
    await expect(called.first).to_contain_text(APPLICATION_NAME)
    await expect(called.first).to_contain_text("whoami")
    await expect(results.locator("tbody tr", has_text="C" * 31 + "…")).to_have_count(1)
    await wide_tab.screenshot("admin-audit-list")

    widths = await _widths(page)
    print(f"audit list at {WIDE['width']}x{WIDE['height']}: {widths}")
    assert widths["viewport"] == WIDE["width"]
    assert widths["document"] <= WIDE["width"], "the page scrolls sideways"
    assert widths["table"] <= WIDE["width"], "the table runs past the screen's edge"
    assert widths["box_content"] <= widths["box"], "the list scrolls sideways in its box"

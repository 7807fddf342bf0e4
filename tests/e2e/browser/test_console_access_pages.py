"""Who reaches acme's console, in real headless Chromium: bob (acme's viewer) sees the tools and the
models pages without a single form, told why; carol (globex's admin) gets the console's not-found
page for acme, never a sign that acme's console exists. Screenshots for CI."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from accounts.models import Role
from portal.console.access import NO_CONSOLE, READ_ONLY
from tests.e2e.browser.pages import sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD

pytestmark = pytest.mark.django_db

TOOLS_PATH = "/console/acme/tools/"
MODELS_PATH = "/console/acme/models/"


async def _expect_read_only(page: Page, heading: str) -> None:
    """The page's own heading, the viewer's note, and no form or button in the page's content (the
    sign-out form and the tenant switcher sit in the navigation, outside ``main``)."""
    await expect(page.get_by_role("heading", level=2, name=heading)).to_be_visible()
    await expect(page.get_by_role("note")).to_have_text(READ_ONLY.format(role=Role.VIEWER))
    await expect(page.locator("main form")).to_have_count(0)
    await expect(page.locator("main button, main input[type=submit]")).to_have_count(0)


async def test_bob_a_viewer_sees_acmes_tools_and_models_without_a_form(tab, server):
    page = tab.page
    await page.goto(f"/accounts/login/?next={TOOLS_PATH}")
    await sign_in_by_keyboard(page, username="bob", password=DEMO_PASSWORD)
    await _expect_read_only(page, "Tools")
    await tab.screenshot("console-viewer")

    await page.goto(MODELS_PATH)
    await _expect_read_only(page, "Models and budgets")
    await tab.screenshot("console-viewer-models")


async def test_carol_from_globex_gets_not_found_for_acmes_console(tab, server):
    page = tab.page
    await page.goto("/accounts/login/")
    await sign_in_by_keyboard(page, username="carol", password=DEMO_PASSWORD)
    await expect(page.get_by_role("button", name="Sign out carol")).to_be_visible()

    for path in ("/console/acme/", TOOLS_PATH):
        response = await page.goto(path)
        assert response is not None
        assert response.status == 404
        await expect(page.get_by_role("heading", name="This page is not available")).to_be_visible()
        await expect(page.get_by_role("alert")).to_have_text(NO_CONSOLE.format(slug="acme"))
    await tab.screenshot("console-outsider")

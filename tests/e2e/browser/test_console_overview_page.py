"""The console's overview in real headless Chromium: alice (acme's admin) opens it, Chart.js (the
vendored file) draws every chart from ``overview.json`` under the strict CSP without a violation,
and the page fits a laptop and a phone; both are kept as screenshots for CI."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD

pytestmark = pytest.mark.django_db

CHARTS = ("chart-calls", "chart-latency", "chart-models")
PHONE = {"width": 390, "height": 844}


async def _drawn_widths(page: Page) -> dict[str, int]:
    """Each chart's drawn width, once Chart.js has made every one of them."""
    await page.wait_for_function(
        "ids => window.Chart && ids.every(id => Chart.getChart(id))", arg=list(CHARTS)
    )
    return await page.evaluate(
        "ids => Object.fromEntries(ids.map(id => [id, Chart.getChart(id).width]))", list(CHARTS)
    )


async def test_alice_sees_the_overview_charts_drawn_under_the_csp_at_1280_px_and_on_a_phone(wide_tab):
    page = wide_tab.page
    violations = policy_violations(page)
    await page.goto("/accounts/login/?next=/console/acme/")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await expect(page.get_by_role("heading", level=2, name="Overview")).to_be_visible()

    widths = await _drawn_widths(page)
    assert all(width > 300 for width in widths.values()), widths
    await expect(page.locator("#table-calls tbody tr")).to_have_count(30)
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-overview")

    await page.set_viewport_size(PHONE)
    await page.reload()
    widths = await _drawn_widths(page)
    assert all(0 < width <= PHONE["width"] for width in widths.values()), widths
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-overview-phone")
    assert violations == []

"""The operators' dashboard at the top of the admin's index in real headless Chromium: an operator
signs in, Chart.js (the vendored file) draws every chart from ``/admin/dashboard.json`` under the
strict CSP without a violation, the tables beside them carry the numbers, and the page fits a laptop
and a phone; both are kept as screenshots for CI."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from core.models import AuditOutcome
from tests.e2e.browser.pages import fits_the_viewport, policy_violations
from tests.support.factories import DEFAULT_PASSWORD, AuditEventFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

CHARTS = ("chart-calls", "chart-latency", "chart-tools", "chart-tenants", "chart-models")
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def operator(committed):
    return committed(UserFactory, username="dashboard-operator", is_staff=True, is_superuser=True)


@pytest.fixture
def traffic(committed):
    """Tool calls in a tenant of the test's own, so the busiest tools and tenants have bars."""
    membership = committed(MembershipFactory)
    for outcome in (AuditOutcome.OK, AuditOutcome.OK, AuditOutcome.ERROR):
        committed(AuditEventFactory, membership=membership, target="dashboard-search", outcome=outcome)
    return membership


async def _drawn(page: Page) -> dict[str, dict[str, int]]:
    """Each chart's drawn size and how many of its pixels are painted, once Chart.js made them all."""
    await page.wait_for_function(
        "ids => window.Chart && ids.every(id => Chart.getChart(id))", arg=list(CHARTS)
    )
    return await page.evaluate(
        """ids => Object.fromEntries(ids.map(id => {
            const canvas = document.getElementById(id);
            const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
            let painted = 0;
            for (let i = 3; i < pixels.length; i += 4) { if (pixels[i] > 0) painted++; }
            return [id, {width: Chart.getChart(id).width, painted}];
        }))""",
        list(CHARTS),
    )


async def test_an_operator_sees_the_dashboard_s_charts_and_tables_under_the_csp(wide_tab, operator, traffic):
    page = wide_tab.page
    violations = policy_violations(page)
    await page.goto("/admin/login/?next=/admin/")
    await page.get_by_label("Username").fill(operator.username)
    await page.get_by_label("Password").fill(DEFAULT_PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("heading", level=2, name="Every tenant, the last 30 days")).to_be_visible()

    drawn = await _drawn(page)
    assert all(chart["width"] > 250 and chart["painted"] > 0 for chart in drawn.values()), drawn
    await expect(page.locator("#table-calls tbody tr")).to_have_count(30)
    await expect(page.locator("#table-tools tbody tr", has_text="dashboard-search")).to_have_count(1)
    await expect(page.locator("#table-tenants tbody tr", has_text=traffic.tenant.slug)).to_have_count(1)
    await expect(page.get_by_role("heading", level=2, name="Health")).to_be_visible()
    await expect(page.locator("#figure-spool")).to_contain_text("audit rows in the spool")
    # The admin's own index is still there, under the dashboard.
    await expect(page.locator("#content-main .module").first).to_be_visible()
    await fits_the_viewport(page)
    await wide_tab.screenshot("admin-dashboard")

    await page.set_viewport_size(PHONE)
    await page.reload()
    drawn = await _drawn(page)
    assert all(0 < chart["width"] <= PHONE["width"] for chart in drawn.values()), drawn
    await fits_the_viewport(page)
    await wide_tab.screenshot("admin-dashboard-phone")
    assert await page.locator("#operator-dashboard").get_attribute("data-failed") is None
    assert violations == []

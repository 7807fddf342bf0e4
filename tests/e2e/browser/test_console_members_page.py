"""The console's members section in real headless Chromium: alice (acme's admin) changes a
member's role from the members table, at 1280 px and on a phone, breaking none of the
Content-Security-Policy, each saved as a screenshot for CI.

Every refusal (last admin, viewers, other tenants' ids, hostile input):
tests/portal/test_console_members.py."""

from __future__ import annotations

import pytest
from playwright.async_api import ViewportSize, expect

from accounts.models import Membership, Role, Tenant
from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD
from tests.support.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture
def dora(committed) -> Membership:
    """A viewer of acme made for this test (removed after it): the demo's people keep their roles."""

    def make() -> Membership:
        user = UserFactory.create(username="dora-console")
        return MembershipFactory.create(user=user, tenant=Tenant.objects.get(slug="acme"), role=Role.VIEWER)

    return committed(make)


async def test_alice_changes_a_members_role_in_the_console(wide_tab, server, dora):
    page = wide_tab.page
    violations = policy_violations(page)
    await page.goto("/accounts/login/?next=/console/acme/members/")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await expect(page.get_by_role("heading", name="Members", exact=True)).to_be_visible()

    await page.get_by_label("Role of dora-console", exact=True).select_option(Role.CONTRIBUTOR.value)
    await page.get_by_role("button", name="Change the role of dora-console").click()

    await expect(page.get_by_role("status")).to_have_text("dora-console is now contributor in Acme.")
    await expect(page.get_by_label("Role of dora-console", exact=True)).to_have_value(Role.CONTRIBUTOR.value)
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-members")
    await page.set_viewport_size(PHONE)
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-members-phone")
    assert violations == []


async def test_the_sign_in_section_says_how_a_tenant_without_a_provider_gets_one(wide_tab, server):
    page = wide_tab.page
    violations = policy_violations(page)
    await page.goto("/accounts/login/?next=/console/acme/identity-provider/")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)

    await expect(page.get_by_role("heading", name="Sign-in through your identity provider")).to_be_visible()
    await expect(page.get_by_role("link", name="Sign-in", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-sign-in")
    assert violations == []

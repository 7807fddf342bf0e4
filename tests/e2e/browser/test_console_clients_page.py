"""The console's service clients page in real headless Chromium: a fresh admin of acme creates a
service client (its secret shown once), finds it listed without the secret, and deletes it, at
1280 px and on a phone, each saved as a screenshot for CI."""

from __future__ import annotations

import secrets

import pytest
from playwright.async_api import expect

from accounts.models import Tenant
from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.e2e.harness import Person
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def fran(committed) -> Person:
    """A fresh admin of acme, so the page shows only this test's clients' changes."""
    user = committed(UserFactory, username=f"fran-{secrets.token_hex(3)}")
    committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="acme"), role="admin")
    return Person(user.username, password=DEFAULT_PASSWORD, tenant="acme")


async def test_an_admin_creates_a_service_client_sees_its_secret_once_and_deletes_it(wide_tab, server, fran):
    page = wide_tab.page
    violations = policy_violations(page)
    # The old address still leads here.
    await page.goto("/accounts/login/?next=/accounts/service-clients/")
    await sign_in_by_keyboard(page, username=fran.username, password=fran.password)
    await expect(page).to_have_url(f"{server.base_url}/console/acme/clients/")

    form = page.locator("#service-client-form")
    await form.get_by_label("Name").fill("Nightly report")
    await form.get_by_label("Role").select_option("viewer")
    await form.get_by_role("button", name="Create").click()

    await expect(page.get_by_role("heading", name="Service client created")).to_be_visible()
    secret = await page.locator("#client-secret").inner_text()
    assert len(secret) > 20
    row = page.locator("table#service-clients tbody tr", has_text="Nightly report")
    await expect(row).to_contain_text("viewer")
    await wide_tab.screenshot("console-client-created")

    await page.goto("/console/acme/clients/")
    await expect(row).to_have_count(1)
    assert secret not in await page.locator("main").inner_text()
    await page.set_viewport_size(PHONE)
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-clients-phone")

    await row.get_by_role("button", name="Delete Nightly report").click()
    await expect(page.get_by_role("status")).to_contain_text("Nightly report was deleted")
    await expect(row).to_have_count(0)
    assert violations == []

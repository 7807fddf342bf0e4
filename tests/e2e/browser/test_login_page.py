"""The login page in real headless Chromium: usable by keyboard alone, with errors announced."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.e2e.browser.pages import open_authorization, sign_in_by_keyboard, tab_to
from tests.e2e.harness import DEMO_PASSWORD
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

# The login template's own wording (templates/registration/login.html).
WRONG_PASSWORD = "Your username and password did not match."


@pytest.fixture
def frank(committed):
    """Frank mistypes his password; an account of his own, so no one else's sign-in budget is spent."""
    return committed(UserFactory, username="frank-browser")


async def test_the_login_page_is_reached_from_an_authorization_request_and_works_by_keyboard(tab, driver):
    page = tab.page
    await open_authorization(driver, page)

    await expect(page.get_by_role("heading", name="Sign in to Gatehouse")).to_be_visible()
    assert page.url.startswith(f"{tab.base_url}/accounts/login/?next=")
    await tab.screenshot("login")
    # Tab order: username, password, the sign-in button.
    await expect(page.get_by_label("Username")).to_be_focused()
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("Password")).to_be_focused()
    await tab_to(page, page.get_by_role("button", name="Sign in"))
    await tab_to(page, page.get_by_label("Username"), backwards=True)

    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)

    await page.wait_for_url(f"{tab.base_url}/oauth/authorize/**")
    await expect(page.get_by_role("button", name="Allow")).to_be_visible()


async def test_a_wrong_password_is_announced_and_can_be_corrected_by_keyboard(tab, driver, frank):
    page = tab.page
    await open_authorization(driver, page)

    await sign_in_by_keyboard(page, username="frank-browser", password="not-his-password")

    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text(WRONG_PASSWORD)
    assert page.url.startswith(f"{tab.base_url}/accounts/login/")
    await expect(page.get_by_label("Username")).to_have_value("frank-browser")
    await expect(page.get_by_label("Password")).to_have_value("")
    await tab.screenshot("login-wrong-password")

    # The focus is back in Username with his name kept: Tab, the right password, Enter.
    await expect(page.get_by_label("Username")).to_be_focused()
    await page.keyboard.press("Tab")
    await page.keyboard.type(DEFAULT_PASSWORD)
    await page.keyboard.press("Enter")

    # Frank belongs to no tenant, so signing in leads to the refusal page, not back to the login.
    await page.wait_for_url(f"{tab.base_url}/oauth/authorize/**")
    await expect(page.get_by_role("heading", name="No tenant to connect")).to_be_visible()


async def test_the_home_page_gives_the_mcp_address_and_after_sign_in_the_person_s_tenants(tab, driver):
    page = tab.page
    await page.goto(f"{tab.base_url}/")
    await expect(page.locator("#mcp-url")).to_have_text(f"{driver.server.public_url}/mcp")
    await tab.screenshot("home")

    await page.get_by_role("link", name="Sign in").click()
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await page.wait_for_url(f"{tab.base_url}/")  # back where the person started
    await expect(page.locator("#tenants")).to_contain_text("Acme")
    await expect(page.get_by_role("link", name="Home")).to_have_attribute("aria-current", "page")

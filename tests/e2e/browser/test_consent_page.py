"""The consent page in real headless Chromium: choose a tenant, allow or deny by keyboard alone;
refusals show their message and send nothing to the client."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import expect

from accounts.models import Tenant
from oauth.authorize import NO_TENANT_MESSAGE, REQUEST_ALTERED, TENANT_NOT_AVAILABLE
from oauth.models import Grant
from tests.e2e.browser.pages import open_authorization, sign_in_by_keyboard, tab_to
from tests.e2e.harness import DEMO_PASSWORD
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def erin(committed):
    """Erin is an admin in acme and a contributor in globex."""
    user = committed(UserFactory, username="erin-browser")
    acme, globex = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="globex")
    committed(MembershipFactory, user=user, tenant=acme, role="admin")
    committed(MembershipFactory, user=user, tenant=globex, role="contributor")
    return user


@pytest.fixture
def nomad(committed):
    """Nomad has an account but belongs to no tenant."""
    return committed(UserFactory, username="nomad-browser")


@sync_to_async
def _granted_tenants(client_id: str) -> list[str]:
    return list(Grant.objects.filter(application__client_id=client_id).values_list("tenant__slug", flat=True))


async def test_a_person_picks_a_tenant_with_the_arrow_keys_and_allows_with_enter(tab, driver, erin):
    page = tab.page
    client_id, verifier, state = await open_authorization(driver, page)
    await sign_in_by_keyboard(page, username="erin-browser", password=DEFAULT_PASSWORD)
    acme = page.get_by_role("radio", name="Acme")
    globex = page.get_by_role("radio", name="Globex")
    await expect(acme).to_be_checked()
    await tab.screenshot("consent")

    await tab_to(page, acme)
    await page.keyboard.press("ArrowDown")
    await expect(globex).to_be_checked()
    await expect(globex).to_be_focused()
    await tab_to(page, page.get_by_role("button", name="Allow"))
    await page.keyboard.press("Enter")

    params = await tab.arrival_params()
    assert params["state"] == state
    assert params["iss"] == driver.server.public_url
    assert await _granted_tenants(client_id) == ["globex"]
    exchanged = await driver.exchange(client_id=client_id, code=params["code"], verifier=verifier)
    assert exchanged.status_code == 200, exchanged.text
    assert exchanged.json()["scope"] == "mcp:read mcp:write"


async def test_deny_by_keyboard_sends_access_denied_to_the_client_and_no_code(tab, driver):
    page = tab.page
    client_id, _, state = await open_authorization(driver, page)
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)

    await tab_to(page, page.get_by_role("button", name="Deny"))
    await page.keyboard.press("Enter")

    params = await tab.arrival_params()
    assert params["error"] == "access_denied"
    assert params["state"] == state
    assert "code" not in params
    assert await _granted_tenants(client_id) == []


async def test_a_person_with_no_tenant_sees_the_refusal_page(tab, driver, nomad):
    page = tab.page
    client_id, _, _ = await open_authorization(driver, page)
    await sign_in_by_keyboard(page, username="nomad-browser", password=DEFAULT_PASSWORD)

    await expect(page.get_by_role("heading", name="No tenant to connect")).to_be_visible()
    await expect(page.get_by_role("alert")).to_have_text(NO_TENANT_MESSAGE)
    await expect(page.get_by_role("button", name="Allow")).to_have_count(0)
    await tab.screenshot("refused-no-tenant")
    assert tab.arrivals == []
    assert await _granted_tenants(client_id) == []


async def test_a_consent_form_with_a_missing_field_is_refused_with_its_message(tab, driver):
    page = tab.page
    client_id, _, _ = await open_authorization(driver, page)
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    allow = page.get_by_role("button", name="Allow")
    await expect(allow).to_be_visible()

    # What someone editing the page in developer tools would do: drop the client_id it carries.
    await page.evaluate("document.querySelector('form input[name=client_id]').remove()")
    await tab_to(page, allow)
    await page.keyboard.press("Enter")

    await expect(page.get_by_role("heading", name="This request was refused")).to_be_visible()
    await expect(page.get_by_role("alert")).to_have_text(REQUEST_ALTERED)
    await tab.screenshot("refused-altered-form")
    assert tab.arrivals == []
    assert await _granted_tenants(client_id) == []


async def test_a_tenant_swapped_into_the_form_is_refused_with_its_message(tab, driver):
    page = tab.page
    client_id, _, _ = await open_authorization(driver, page)
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    acme = page.get_by_role("radio", name="Acme")
    await expect(acme).to_be_checked()

    # Alice is only in acme; point her choice at globex behind the page's back.
    await acme.evaluate("radio => { radio.value = 'globex'; }")
    await tab_to(page, page.get_by_role("button", name="Allow"))
    await page.keyboard.press("Enter")

    await expect(page.get_by_role("alert")).to_have_text(TENANT_NOT_AVAILABLE)
    await tab.screenshot("refused-other-tenant")
    assert tab.arrivals == []
    assert await _granted_tenants(client_id) == []


async def test_the_consent_page_says_who_is_signed_in_and_another_person_can_take_over(tab, driver, erin):
    """ "Not you? Sign out" leads back to the sign-in page of the same request, and the next person
    sees the consent page as themselves."""
    page = tab.page
    await open_authorization(driver, page)
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await expect(page.locator("#signed-in")).to_contain_text("Signed in as alice")

    await page.get_by_role("button", name="Sign out").click()
    await sign_in_by_keyboard(page, username="erin-browser", password=DEFAULT_PASSWORD)

    await expect(page.locator("#signed-in")).to_contain_text("Signed in as erin-browser")
    await expect(page.get_by_role("radio", name="Globex")).to_be_visible()


async def test_allow_is_the_primary_button_and_deny_looks_different(tab, driver):
    page = tab.page
    await open_authorization(driver, page)
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)

    allow = await page.get_by_role("button", name="Allow").evaluate(
        "b => getComputedStyle(b).backgroundColor"
    )
    deny = await page.get_by_role("button", name="Deny").evaluate("b => getComputedStyle(b).backgroundColor")
    assert allow != deny

"""A person's connected-applications page in real headless Chromium, saved as screenshots for CI at a
laptop's width and a phone's: two clients of one name told apart, the permissions' sentences opened
by keyboard from the names, and a hostile client name shown as text, cut, without widening the page.
The connections are written with the factories and committed, so the Daphne server reads them as it
would ones a client made through OAuth (tests/e2e/oauth/test_connected_apps.py does that)."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import Application
from playwright.async_api import ViewportSize, expect

from accounts.models import Membership, Tenant
from accounts.scopes import SCOPE_WRITE, scope_definitions
from oauth.models import AccessToken
from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard, tab_to
from tests.e2e.harness import Person
from tests.support.factories import (
    DEFAULT_PASSWORD,
    AccessTokenFactory,
    ApplicationFactory,
    MembershipFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

NEWCOMER = "Newcomer SDK client"
HOSTILE = "<script>alert(1)</script>\u202e" + "W" * 200
PHONE: ViewportSize = {"width": 390, "height": 844}


def _connect(*, membership: Membership, name: str, redirect_uri: str, days_ago: int) -> Application:
    application = ApplicationFactory.create(
        name=name, redirect_uris=redirect_uri, registration_source=Application.RegistrationSource.DCR
    )
    Application.objects.filter(pk=application.pk).update(created=timezone.now() - timedelta(days=days_ago))
    token = AccessTokenFactory.create(
        membership=membership, application=application, scope=" ".join(sorted(scope_definitions()))
    )
    AccessToken.objects.filter(pk=token.pk).update(updated=timezone.now() - timedelta(hours=days_ago))
    application.refresh_from_db()
    return application


@pytest.fixture
def hana(committed) -> tuple[Person, list[Application]]:
    """A fresh acme admin with two connections of one name and one of a hostile name."""
    user = committed(UserFactory, username=f"hana-{secrets.token_hex(3)}")
    membership = committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="acme"), role="admin")
    namesakes = [
        committed(
            _connect,
            membership=membership,
            name=NEWCOMER,
            redirect_uri=f"http://127.0.0.1:{port}/callback",
            days_ago=days_ago,
        )
        for days_ago, port in ((1, 53122), (3, 60111))
    ]
    committed(
        _connect, membership=membership, name=HOSTILE, redirect_uri="https://evil.example/cb", days_ago=5
    )
    return Person(user.username, password=DEFAULT_PASSWORD, tenant="acme"), namesakes


async def test_namesakes_are_told_apart_and_the_page_reads_on_a_laptop_and_a_phone(wide_tab, hana):
    person, namesakes = hana
    page = wide_tab.page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    violations = policy_violations(page)
    await page.goto("/accounts/login/?next=/accounts/connected/")
    await sign_in_by_keyboard(page, username=person.username, password=person.password)
    await expect(page.get_by_role("heading", level=1, name="Connected applications")).to_be_visible()

    rows = page.locator("table#connections tbody tr")
    await expect(rows).to_have_count(3)
    newer, older = rows.nth(0), rows.nth(1)
    for row, port, application in zip((newer, older), (53122, 60111), namesakes, strict=True):
        await expect(row.locator("bdi.client-name")).to_have_text(NEWCOMER)
        await expect(row).to_contain_text(f"Registered {application.created:%Y-%m-%d %H:%M} UTC")
        await expect(row).to_contain_text(f"Runs on this computer, port {port}")
    hostile = rows.nth(2)
    await expect(hostile.locator("bdi.client-name")).to_have_text(HOSTILE.replace("\u202e", "")[:79] + "…")
    await expect(hostile).to_contain_text("Sends you back to evil.example")
    await expect(page.locator("table#connections script")).to_have_count(0)

    sentence = newer.get_by_text(scope_definitions()[SCOPE_WRITE].description)
    await expect(sentence).to_be_hidden()
    await expect(newer.locator("summary")).to_contain_text(SCOPE_WRITE)
    await tab_to(page, newer.locator("summary"))
    await page.keyboard.press("Enter")
    await expect(sentence).to_be_visible()
    await fits_the_viewport(page)
    await wide_tab.screenshot("connected-applications")

    await page.set_viewport_size(PHONE)
    await expect(page.get_by_role("button", name=f"Disconnect {NEWCOMER}").first).to_be_visible()
    await fits_the_viewport(page)
    await wide_tab.screenshot("connected-applications-phone")
    assert violations == []
    assert dialogs == []

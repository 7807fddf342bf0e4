"""A person's yes is remembered per client, tenant and scopes: the same request skips the consent
page (the official SDK client never notices), a larger one or an ambiguous tenant asks again."""

from __future__ import annotations

import httpx
import pytest

from accounts.models import Tenant
from core.models import AuditAction, AuditEvent
from tests.e2e.harness import Browser, Person, redirect_params, sdk_client
from tests.e2e.oauth_driver import OAuthDriver, pkce_pair
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


class RememberingBrowser(Browser):
    """A browser that also accepts the answer a remembered consent gives: a redirect with a code
    instead of the page. It counts the pages it was shown."""

    pages_shown = 0

    async def authorize(
        self, url: str, *, username: str, password: str, tenant: str | None = None, allow: bool = True
    ) -> httpx.Response:
        page = await self.open(url, username=username, password=password)
        if page.status_code == 302:
            return page
        self.pages_shown += 1
        return await self.decide(page, tenant=tenant, allow=allow)


async def _open(driver: OAuthDriver, browser: Browser, person: Person, client_id: str, **extra: str):
    """Open an authorization request; return (verifier, what the person's browser got back)."""
    verifier, challenge = pkce_pair()
    url = driver.authorize_url(client_id=client_id, challenge=challenge, **extra)
    return verifier, await browser.open(url, username=person.username, password=person.password)


async def test_a_second_authorization_for_the_same_scopes_skips_the_page_and_works(driver, browser):
    alice = Person("alice")
    client_id = await driver.register()
    _, first = await _open(driver, browser, alice, client_id)
    assert first.status_code == 200
    assert "code" in redirect_params(await browser.decide(first))

    verifier, second = await _open(driver, browser, alice, client_id)

    code = redirect_params(second)["code"]
    token = await driver.exchange(client_id=client_id, code=code, verifier=verifier)
    assert token.status_code == 200, token.text
    assert set(token.json()["scope"].split()) == {"mcp:read", "mcp:write"}
    remembered = AuditEvent.objects.filter(
        client_id=client_id, action=AuditAction.CONSENT_GRANTED, detail__remembered=True
    )
    assert await remembered.acount() == 1


async def test_the_sdk_client_authorizing_again_is_not_shown_the_page(server):
    """Same client (its registration kept), tokens lost: the flow runs again without a page."""
    browser = RememberingBrowser(server.base_url)
    alice = Person("alice")
    try:
        async with sdk_client(server, alice, browser=browser) as (client, storage):
            await client.call_tool("whoami", {})
        storage.tokens = None
        async with sdk_client(server, alice, browser=browser, storage=storage) as (client, _):
            whoami = await client.call_tool("whoami", {})
    finally:
        await browser.aclose()
    assert not whoami.is_error
    assert alice.logins == 2, "the client went through authorization twice"
    assert browser.pages_shown == 1, "the person saw the consent page once"


async def test_asking_for_more_scopes_than_remembered_shows_the_page_again(driver, browser):
    alice = Person("alice")
    client_id = await driver.register()
    _, first = await _open(driver, browser, alice, client_id, scope="mcp:read")
    assert "code" in redirect_params(await browser.decide(first))

    _, larger = await _open(driver, browser, alice, client_id)

    assert larger.status_code == 200
    assert 'name="tenant"' in larger.text


@pytest.fixture
def dana(committed) -> Person:
    """Dana is a viewer in acme and a contributor in globex."""
    user = committed(UserFactory, username="dana-consent")
    acme, globex = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="globex")
    committed(MembershipFactory, user=user, tenant=acme, role="viewer")
    committed(MembershipFactory, user=user, tenant=globex, role="contributor")
    return Person(user.username, password=DEFAULT_PASSWORD)


async def test_another_tenant_asks_again_and_then_the_page_preselects_the_latest(server, dana):
    driver, browser = OAuthDriver(server), Browser(server.base_url)
    try:
        client_id = await driver.register()
        _, first = await _open(driver, browser, dana, client_id)
        assert "code" in redirect_params(await browser.decide(first, tenant="acme"))
        # One remembered tenant: Dana is not asked which one again.
        _, skipped = await _open(driver, browser, dana, client_id)
        assert "code" in redirect_params(skipped)

        # The client asks for the page; Dana connects the other tenant as well.
        _, forced = await _open(driver, browser, dana, client_id, prompt="consent")
        assert forced.status_code == 200
        assert "code" in redirect_params(await browser.decide(forced, tenant="globex"))

        # Two remembered tenants fit: skipping would be a guess, so the page asks again.
        _, ambiguous = await _open(driver, browser, dana, client_id)
    finally:
        await browser.aclose()
        await driver.aclose()
    assert ambiguous.status_code == 200
    assert 'value="globex" id="tenant-globex"' in ambiguous.text
    assert "checked" in ambiguous.text.split('id="tenant-globex"')[1].split(">")[0]
    assert "checked" not in ambiguous.text.split('id="tenant-acme"')[1].split(">")[0]

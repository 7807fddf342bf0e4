"""A person in several tenants picks one on the consent page; the token belongs to that one only."""

from __future__ import annotations

import pytest

from accounts.models import Tenant
from tests.e2e.harness import (
    ACME_VIEWER_SCOPE,
    ACME_VIEWER_TOOLS,
    GLOBEX_DEMO_TOOLS,
    RESEARCH_TOOLS,
    Browser,
    Person,
    redirect_params,
    sdk_client,
)
from tests.e2e.oauth_driver import OAuthDriver
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana(committed):
    """Dana is a viewer in acme and a contributor in globex."""
    user = committed(UserFactory, username="dana")
    acme, globex = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="globex")
    committed(MembershipFactory, user=user, tenant=acme, role="viewer")
    committed(MembershipFactory, user=user, tenant=globex, role="contributor")
    return user


async def test_the_consent_page_offers_each_of_the_person_s_tenants(server, dana):
    driver = OAuthDriver(server)
    browser = Browser(server.base_url)
    try:
        _, page = await driver.open_authorization(browser, Person("dana", password=DEFAULT_PASSWORD))
        assert page.status_code == 200
        assert "Acme" in page.text
        assert "Globex" in page.text
        assert "you are viewer" in page.text
        assert "you are contributor" in page.text
        # Acme is listed first; choosing Globex must be honoured.
        params = redirect_params(await browser.decide(page, tenant="globex"))
        assert "code" in params
    finally:
        await browser.aclose()
        await driver.aclose()


async def test_the_chosen_tenant_and_its_role_decide_what_the_token_can_do(server, dana):
    dana_in_globex = Person("dana", password=DEFAULT_PASSWORD, tenant="globex")
    async with sdk_client(server, dana_in_globex) as (client, storage):
        tools = await client.list_tools()
        whoami = await client.call_tool("whoami", {})
    assert {tool.name for tool in tools.tools} == {
        "whoami",
        "set_display_name",
        *GLOBEX_DEMO_TOOLS,
        *RESEARCH_TOOLS,
    }
    assert whoami.structured_content is not None
    assert whoami.structured_content["tenant"]["slug"] == "globex"
    assert whoami.structured_content["role"] == "contributor"

    dana_in_acme = Person("dana", password=DEFAULT_PASSWORD, tenant="acme")
    async with sdk_client(server, dana_in_acme) as (client, storage):
        tools = await client.list_tools()
        whoami = await client.call_tool("whoami", {})
    assert [tool.name for tool in tools.tools] == ACME_VIEWER_TOOLS
    assert whoami.structured_content is not None
    assert whoami.structured_content["tenant"]["slug"] == "acme"
    assert storage.tokens is not None
    assert storage.tokens.scope == ACME_VIEWER_SCOPE

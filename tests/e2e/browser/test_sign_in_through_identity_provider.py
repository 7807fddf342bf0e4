"""Sign-in through a tenant's identity provider, in real Chromium against a real OpenID provider
(panva's oidc-provider, ``tests/support/oidc_op.py``): the person types their work email on
Gatehouse's sign-in page, signs in at the provider, comes back as a member of acme with the role
their groups map to, consents, and an MCP client then reaches acme's tools with the token; a
changed group changes the role at the next sign-in; a person disabled at the provider cannot sign
in again; an email no provider serves is told to use a password."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import Page, expect

from accounts.models import ExternalIdentity, IdentityProvider, Membership, Role, Tenant
from core.crypto import secret_encrypt
from core.models import AuditAction, AuditEvent
from tests.e2e.browser.pages import open_authorization
from tests.support.oidc_op import OP_PASSWORD, OidcAccount, OidcClient, OpenIdProvider

pytestmark = pytest.mark.django_db

CLIENT_SECRET = "acme-gatehouse-client-secret"
DANA = OidcAccount(
    subject="acme-dana-0001",
    email="dana@acme.test",
    name="Dana",
    groups=("gatehouse-admins",),
    email_verified=True,
)
ROLE_MAP = {"gatehouse-admins": "admin", "gatehouse-readers": "viewer"}


@pytest.fixture(scope="module")
def op(server, tmp_path_factory) -> Iterator[OpenIdProvider]:
    client = OidcClient(
        client_id="gatehouse-acme",
        client_secret=CLIENT_SECRET,
        redirect_uris=(f"{server.public_url}/accounts/sso/callback/",),
        metadata={},
    )
    with OpenIdProvider(clients=[client], accounts=[DANA], workdir=tmp_path_factory.mktemp("op")) as provider:
        yield provider


@pytest.fixture
def acme_provider(committed, op) -> IdentityProvider:
    # Whatever a test before changed at the provider (a group, a disabled account), Dana is back.
    op.set_accounts([DANA])
    return committed(
        IdentityProvider.objects.create,
        tenant=Tenant.objects.get(slug="acme"),
        name="Acme SSO",
        issuer=op.issuer,
        client_id="gatehouse-acme",
        client_secret_encrypted=secret_encrypt(plaintext=CLIENT_SECRET),
        email_domains=["acme.test"],
        role_claim="groups",
        role_map=ROLE_MAP,
    )


async def _through_the_provider(page: Page, *, email: str) -> None:
    """On Gatehouse's sign-in page: the work email, then the provider's own sign-in form."""
    await page.get_by_label("Work email").fill(email)
    await page.get_by_role("button", name="Continue with your organisation").click()
    await page.locator("#login").fill(email)
    await page.locator("#password").fill(OP_PASSWORD)
    await page.locator("button[type=submit]").click()


async def _role(username: str) -> str | None:
    membership = await Membership.objects.filter(user__username=username, tenant__slug="acme").afirst()
    return membership.role if membership else None


async def test_a_person_signs_in_through_acmes_provider_and_an_mcp_client_reaches_acmes_tools(
    tab, driver, server, op, acme_provider
):
    page = tab.page
    client_id, verifier, state = await open_authorization(driver, page)
    await _through_the_provider(page, email=DANA.email)
    await expect(page.get_by_role("button", name="Allow")).to_be_visible()
    await tab.screenshot("sign-in-through-identity-provider-consent")
    await page.get_by_role("button", name="Allow").click()
    params = await tab.arrival_params()
    assert params["state"] == state
    exchanged = await driver.exchange(client_id=client_id, code=params["code"], verifier=verifier)
    assert exchanged.status_code == 200, exchanged.text
    token = exchanged.json()["access_token"]

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        whoami = await client.call_tool("whoami", {})
    assert not whoami.is_error, whoami.content
    assert whoami.structured_content["tenant"]["slug"] == "acme"
    assert whoami.structured_content["role"] == Role.ADMIN
    identity = await ExternalIdentity.objects.select_related("user").aget(subject=DANA.subject)
    assert identity.user.email == DANA.email
    signed_in = AuditEvent.objects.filter(action=AuditAction.LOGIN_SUCCEEDED, user=identity.user)
    row = await signed_in.afirst()
    assert row is not None
    assert row.detail["via"] == "identity_provider"


async def test_the_role_follows_the_group_and_a_disabled_person_cannot_sign_in_again(tab, op, acme_provider):
    page = tab.page
    op.set_accounts([dataclasses.replace(DANA, groups=("gatehouse-readers",))])
    await page.goto(f"{tab.base_url}/accounts/login/")
    await _through_the_provider(page, email=DANA.email)
    await expect(page).to_have_url(f"{tab.base_url}/")
    assert await _role(DANA.email) == Role.VIEWER

    op.set_accounts([dataclasses.replace(DANA, disabled=True)])
    await page.context.clear_cookies()
    await page.goto(f"{tab.base_url}/accounts/sso/acme/")
    await page.locator("#login").fill(DANA.email)
    await page.locator("#password").fill(OP_PASSWORD)
    await page.locator("button[type=submit]").click()
    await expect(page.locator("#error")).to_have_text("This account is disabled.")
    await tab.screenshot("sign-in-through-identity-provider-disabled")


async def test_an_email_no_provider_serves_is_told_to_use_a_password(tab, acme_provider):
    page = tab.page
    await page.goto(f"{tab.base_url}/accounts/login/")
    await page.get_by_label("Work email").fill("ada@elsewhere.test")
    await page.get_by_role("button", name="Continue with your organisation").click()
    await expect(page.get_by_role("alert")).to_contain_text("No organisation signs in with addresses at")

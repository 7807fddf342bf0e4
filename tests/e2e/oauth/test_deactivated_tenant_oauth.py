"""A deactivated tenant (``Tenant.is_active=False``) at the authorization server (issue 13, item 10):
its refresh tokens are refused, saying why and audited; a code issued for it before it was
deactivated is refused at the exchange; the consent page no longer offers it, and a form that
chooses it anyway is refused and audited as tampered. (Its access tokens at /mcp and its sessions
are the MCP endpoint's part, tested with it.)"""

from __future__ import annotations

import pytest

from accounts.models import Role, Tenant
from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.validators import TENANT_INACTIVE
from tests.e2e.conftest import person_of
from tests.e2e.harness import Browser, parse_form
from tests.e2e.oauth_driver import OAuthDriver
from tests.support.factories import MembershipFactory

pytestmark = pytest.mark.django_db


async def _deactivate(slug: str) -> None:
    assert await Tenant.objects.filter(slug=slug).aupdate(is_active=False) == 1


async def test_a_refresh_for_a_deactivated_tenant_is_refused_and_audited(driver, own_admin):
    person = person_of(own_admin)
    tokens = await driver.token_for(person)
    await _deactivate(own_admin.tenant.slug)

    response = await driver.http.post(
        "/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": tokens["client_id"],
        },
    )

    assert response.status_code == 400
    assert response.json() == {"error": "invalid_grant", "error_description": TENANT_INACTIVE}
    event = await AuditEvent.objects.aget(action=AuditAction.TOKEN_REFRESHED, client_id=tokens["client_id"])
    assert event.outcome == AuditOutcome.ERROR
    assert event.detail["error"] == "invalid_grant"
    assert event.detail["error_description"] == TENANT_INACTIVE


async def test_a_code_for_a_tenant_deactivated_before_the_exchange_issues_no_token(driver, own_admin):
    person = person_of(own_admin)
    client_id, code, verifier = await driver.code_for(person)
    await _deactivate(own_admin.tenant.slug)

    response = await driver.exchange(client_id=client_id, code=code, verifier=verifier)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid_grant", "error_description": TENANT_INACTIVE}


async def test_the_consent_page_does_not_offer_a_deactivated_tenant_and_refuses_it_posted(
    server, committed, own_admin
):
    person = person_of(own_admin)
    dormant = committed(MembershipFactory, user=own_admin.user, role=Role.ADMIN)
    await _deactivate(dormant.tenant.slug)
    driver, browser = OAuthDriver(server), Browser(server.base_url)
    try:
        _, page = await driver.open_authorization(browser, person)
        assert page.status_code == 200, page.text[:500]
        assert parse_form(page.text)["radios"]["tenant"] == [person.tenant]
        assert dormant.tenant.name not in page.text

        response = await browser.decide(page, tenant=dormant.tenant.slug)
    finally:
        await browser.aclose()
        await driver.aclose()

    assert response.status_code == 400
    assert "location" not in response.headers
    event = await AuditEvent.objects.aget(action=AuditAction.CONSENT_TAMPERED, username=person.username)
    assert event.outcome == AuditOutcome.DENIED
    assert event.detail["tenant"] == dormant.tenant.slug

"""A consent form edited before it is posted is refused with a plain page, never a code, a redirect
or a 500, and each refusal is in the audit trail (issue 13, item 8): the tenant swapped for one the
person is not a member of, a scope the client did not ask for, another client, another redirect."""

from __future__ import annotations

import httpx
import pytest

from core.models import AuditAction, AuditEvent, AuditOutcome
from tests.e2e.harness import Browser, Person, parse_form
from tests.e2e.oauth_driver import OAuthDriver

pytestmark = pytest.mark.django_db


async def _post_altered(
    driver: OAuthDriver, browser: Browser, person: Person, *, requested: str = "mcp:read", **changes: str
) -> tuple[str, httpx.Response]:
    client_id, page = await driver.open_authorization(browser, person, scope=requested)
    assert page.status_code == 200, page.text[:500]
    form = parse_form(page.text)
    fields = {**form["fields"], "tenant": form["radios"]["tenant"][0], "allow": "Authorize", **changes}
    return client_id, await browser.client.post(str(page.request.url), data=fields)


async def _tampered_event(client_id: str) -> AuditEvent:
    return await AuditEvent.objects.aget(action=AuditAction.CONSENT_TAMPERED, client_id=client_id)


def _assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text[:500]
    assert "location" not in response.headers
    assert "This request was refused" in response.text


async def test_a_tenant_the_person_is_not_a_member_of_is_refused_and_audited(driver, browser):
    # Bob is in acme only; globex exists.
    client_id, response = await _post_altered(driver, browser, Person("bob"), tenant="globex")

    _assert_refused(response)
    event = await _tampered_event(client_id)
    assert event.outcome == AuditOutcome.DENIED
    assert event.username == "bob"
    assert event.detail == {"fields": ["tenant"], "tenant": "globex"}


async def test_a_scope_the_client_did_not_ask_for_is_refused_and_audited(driver, browser):
    # Alice's role allows mcp:write; the client asked for mcp:read only.
    client_id, response = await _post_altered(
        driver, browser, Person("alice"), requested="mcp:read", scope="mcp:read mcp:write"
    )

    _assert_refused(response)
    assert (await _tampered_event(client_id)).detail == {"fields": ["scope"]}


async def test_a_narrower_scope_is_the_person_s_choice_and_is_honoured(driver, browser):
    _, response = await _post_altered(
        driver, browser, Person("alice"), requested="mcp:read mcp:write", scope="mcp:read"
    )

    assert response.status_code == 302
    assert "code=" in response.headers["location"]


async def test_another_client_id_is_refused_and_audited(driver, browser):
    client_id, response = await _post_altered(driver, browser, Person("alice"), client_id="no-such-client")

    _assert_refused(response)
    assert (await _tampered_event(client_id)).detail == {"fields": ["client_id"]}


async def test_another_redirect_uri_is_refused_and_audited(driver, browser):
    client_id, response = await _post_altered(
        driver, browser, Person("alice"), redirect_uri="https://evil.example/callback"
    )

    _assert_refused(response)
    assert (await _tampered_event(client_id)).detail == {"fields": ["redirect_uri"]}

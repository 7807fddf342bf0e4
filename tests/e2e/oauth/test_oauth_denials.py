"""The authorization server refuses every request the issue lists, through the real pages."""

from __future__ import annotations

import pytest

from oauth.models import Grant
from tests.e2e.harness import Person, parse_form, redirect_params
from tests.e2e.oauth_driver import pkce_pair
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


async def test_an_authorization_request_without_pkce_is_refused(driver, browser):
    _, response = await driver.open_authorization(browser, Person("alice"), challenge=None, method=None)
    params = redirect_params(response)
    assert params["error"] == "invalid_request"
    assert "code" not in params


async def test_plain_pkce_is_refused(driver, browser):
    verifier, _ = pkce_pair()
    _, response = await driver.open_authorization(
        browser, Person("alice"), challenge=verifier, method="plain"
    )
    params = redirect_params(response)
    assert params["error"] == "invalid_request"
    assert "S256" in params["error_description"]


async def test_a_challenge_without_a_method_counts_as_plain_and_is_refused(driver, browser):
    verifier, _ = pkce_pair()
    _, response = await driver.open_authorization(browser, Person("alice"), challenge=verifier, method=None)
    assert redirect_params(response)["error"] == "invalid_request"


async def test_a_code_cannot_be_redeemed_twice(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))
    first = await driver.exchange(client_id=client_id, code=code, verifier=verifier)
    second = await driver.exchange(client_id=client_id, code=code, verifier=verifier)
    assert first.status_code == 200
    assert second.status_code == 400
    assert second.json()["error"] == "invalid_grant"


async def test_a_code_without_its_verifier_is_refused(driver):
    client_id, code, _ = await driver.code_for(Person("alice"))
    response = await driver.exchange(client_id=client_id, code=code, verifier=None)
    assert response.status_code == 400


async def test_a_code_with_the_wrong_verifier_is_refused(driver):
    client_id, code, _ = await driver.code_for(Person("alice"))
    wrong, _ = pkce_pair()
    response = await driver.exchange(client_id=client_id, code=code, verifier=wrong)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


async def test_an_unregistered_redirect_uri_is_refused_without_redirecting(driver, browser):
    _, response = await driver.open_authorization(
        browser, Person("alice"), redirect_uri="https://attacker.example/cb"
    )
    assert response.status_code == 400
    assert "attacker.example" not in response.headers.get("location", "")


async def test_a_token_for_another_resource_cannot_be_requested(driver, browser):
    _, response = await driver.open_authorization(
        browser, Person("alice"), resource="https://elsewhere.example/mcp"
    )
    assert redirect_params(response)["error"] == "invalid_target"


async def test_a_viewer_is_granted_only_the_read_scope(driver):
    tokens = await driver.token_for(Person("bob"))
    assert tokens["scope"] == "mcp:read"


async def test_carol_cannot_obtain_a_token_for_acme(driver, browser):
    client_id, page = await driver.open_authorization(browser, Person("carol"))
    assert page.status_code == 200
    assert "Acme" not in page.text
    response = await browser.decide(page, tenant="acme")
    assert response.status_code == 400
    assert "not one of yours" in response.text
    assert not await Grant.objects.filter(application__client_id=client_id).aexists()


async def test_a_person_with_no_tenant_sees_a_refusal_and_gets_no_code(driver, browser, committed):
    committed(UserFactory, username="drifter")
    _, response = await driver.open_authorization(browser, Person("drifter", password=DEFAULT_PASSWORD))
    assert response.status_code == 403
    assert "not a member of any tenant" in response.text
    assert "authorizationForm" not in response.text


async def test_the_consent_page_names_client_redirect_host_tenant_and_scopes(driver, browser):
    _, page = await driver.open_authorization(browser, Person("bob"))
    assert page.status_code == 200
    assert "Gatehouse denial tests" in page.text
    assert "127.0.0.1:9" in page.text
    assert "Acme" in page.text
    assert "See who you are and use read-only tools" in page.text
    assert "Not granted by your role" in page.text
    assert 'name="allow"' in page.text


async def test_denying_consent_returns_access_denied(driver, browser):
    _, page = await driver.open_authorization(browser, Person("alice"))
    params = redirect_params(await browser.decide(page, allow=False))
    assert params["error"] == "access_denied"
    assert "code" not in params


async def test_an_altered_consent_form_is_refused_without_redirecting(driver, browser):
    _, page = await driver.open_authorization(browser, Person("alice"))
    fields = dict(parse_form(page.text)["fields"])
    del fields["redirect_uri"]
    response = await browser.client.post(
        str(page.request.url), data={**fields, "tenant": "acme", "allow": "1"}
    )
    assert response.status_code == 400
    assert "incomplete or altered" in response.text
    assert "location" not in response.headers

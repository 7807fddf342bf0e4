"""Every authorization response sent back to the client names the issuer (RFC 9207 section 2):
errors too, so a client talking to several servers can tell which one refused it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.e2e.harness import REDIRECT_URI, Person, redirect_params
from tests.e2e.oauth_driver import pkce_pair

pytestmark = pytest.mark.django_db


async def _issuer(driver) -> str:
    response = await driver.http.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    return str(response.json()["issuer"])


def _iss_values(response) -> list[str]:
    query = parse_qs(urlsplit(response.headers["location"]).query)
    return query.get("iss", [])


async def test_deny_sends_access_denied_with_the_issuer(driver, browser):
    _, page = await driver.open_authorization(browser, Person("alice"))
    response = await browser.decide(page, allow=False)
    params = redirect_params(response)
    assert params["error"] == "access_denied"
    assert _iss_values(response) == [await _issuer(driver)]


async def test_an_unknown_scope_is_refused_with_the_issuer(driver, browser):
    _, response = await driver.open_authorization(browser, Person("alice"), scope="mcp:read no-such-scope")
    params = redirect_params(response)
    assert params["error"] == "invalid_scope"
    assert _iss_values(response) == [await _issuer(driver)]


async def test_a_refused_pkce_method_is_refused_with_the_issuer(driver, browser):
    verifier, _ = pkce_pair()
    _, response = await driver.open_authorization(
        browser, Person("alice"), challenge=verifier, method="plain"
    )
    assert redirect_params(response)["error"] == "invalid_request"
    assert _iss_values(response) == [await _issuer(driver)]


async def test_prompt_none_while_signed_out_is_refused_with_the_issuer(driver):
    client_id = await driver.register()
    _, challenge = pkce_pair()
    response = await driver.http.get(
        driver.authorize_url(client_id=client_id, challenge=challenge, prompt="none")
    )
    assert redirect_params(response)["error"] == "login_required"
    assert _iss_values(response) == [await _issuer(driver)]


async def test_a_code_still_carries_the_issuer_once(driver, browser):
    _, page = await driver.open_authorization(browser, Person("alice"))
    response = await browser.decide(page, tenant="acme")
    assert "code" in redirect_params(response)
    assert _iss_values(response) == [await _issuer(driver)]
    assert response.headers["location"].startswith(REDIRECT_URI + "?")

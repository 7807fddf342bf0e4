"""Cursor's sign-in, over real HTTP against Daphne: it registers a private-use redirect URI
(RFC 8252 §7.1) with the three URIs it really sends, and the browser is sent back through
``cursor://`` with a code (or Deny's error) and the issuer; the code is redeemed with PKCE. Schemes
with a meaning of their own are refused at registration, and a URI other than the registered one
at authorization, with the error page rather than a redirect."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest
from oauth2_provider.models import Application

from oauth.registration_policy import INVALID_REDIRECT_URI
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import pkce_pair

pytestmark = pytest.mark.django_db

CURSOR = "cursor://anysphere.cursor-mcp/oauth/callback"
# What Cursor sends to the registration endpoint (reported by servers that refused it).
CURSOR_REDIRECT_URIS = [
    CURSOR,
    "https://www.cursor.com/agents/mcp/oauth/callback",
    "http://localhost:8787/callback",
]


async def _issuer(driver) -> str:
    return str((await driver.http.get("/.well-known/oauth-authorization-server")).json()["issuer"])


def _sent_back(response) -> tuple[str, dict[str, list[str]]]:
    """Where the browser is sent (the URI without its query) and the query's parameters."""
    assert response.status_code == 302, response.text[:500]
    location = response.headers["location"]
    base, _, query = location.partition("?")
    return base, parse_qs(query)


async def _open(driver, browser, *, client_id: str, redirect_uri: str = CURSOR, **extra: str):
    verifier, challenge = pkce_pair()
    alice = Person("alice")
    url = driver.authorize_url(client_id=client_id, challenge=challenge, redirect_uri=redirect_uri, **extra)
    return verifier, await browser.open(url, username=alice.username, password=alice.password)


async def test_cursor_registers_signs_in_and_redeems_its_code(driver, browser):
    client_id = await driver.register(redirect_uris=CURSOR_REDIRECT_URIS)
    verifier, page = await _open(driver, browser, client_id=client_id, state="cursor-state")
    assert page.status_code == 200, page.text[:500]

    base, params = _sent_back(await browser.decide(page, tenant="acme"))

    assert base == CURSOR
    assert params["state"] == ["cursor-state"]
    assert params["iss"] == [await _issuer(driver)]
    response = await driver.exchange(
        client_id=client_id, code=params["code"][0], verifier=verifier, redirect_uri=CURSOR
    )
    assert response.status_code == 200, response.text
    assert response.json()["token_type"] == "Bearer"


async def test_a_code_sent_through_cursor_is_useless_without_the_verifier(driver, browser):
    client_id = await driver.register(redirect_uris=[CURSOR])
    _, page = await _open(driver, browser, client_id=client_id)
    _, params = _sent_back(await browser.decide(page, tenant="acme"))
    other_verifier, _ = pkce_pair()

    response = await driver.exchange(
        client_id=client_id, code=params["code"][0], verifier=other_verifier, redirect_uri=CURSOR
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


async def test_deny_sends_access_denied_and_the_issuer_through_cursor(driver, browser):
    client_id = await driver.register(redirect_uris=[CURSOR])
    _, page = await _open(driver, browser, client_id=client_id)

    base, params = _sent_back(await browser.decide(page, allow=False))

    assert base == CURSOR
    assert params["error"] == ["access_denied"]
    assert params["iss"] == [await _issuer(driver)]
    assert "code" not in params


async def test_an_error_found_before_the_page_is_sent_through_cursor_too(driver, browser):
    """DOT hands these errors no client; Gatehouse finds it, so cursor:// is still allowed."""
    client_id = await driver.register(redirect_uris=[CURSOR])

    _, response = await _open(driver, browser, client_id=client_id, scope="mcp:read no-such-scope")

    base, params = _sent_back(response)
    assert base == CURSOR
    assert params["error"] == ["invalid_scope"]
    assert params["iss"] == [await _issuer(driver)]


@pytest.mark.parametrize(
    "redirect_uri",
    [
        pytest.param("cursor://anysphere.cursor-mcp/oauth/callbacK", id="one-character"),
        pytest.param("cursor://anysphere.cursor-mcp/oauth/other", id="other-path"),
        pytest.param("cursor://attacker.example/oauth/callback", id="other-host"),
        pytest.param("evilapp://anysphere.cursor-mcp/oauth/callback", id="other-scheme"),
        pytest.param("javascript://anysphere.cursor-mcp/%0aalert(1)", id="javascript"),
    ],
)
async def test_another_custom_uri_than_the_registered_one_gets_the_error_page(driver, browser, redirect_uri):
    client_id = await driver.register(redirect_uris=[CURSOR])

    _, response = await _open(driver, browser, client_id=client_id, redirect_uri=redirect_uri)

    assert response.status_code == 400
    assert "location" not in response.headers


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(document.domain)",
        "JavaScript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "file:///etc/passwd",
        "vbscript:msgbox(1)",
        "my_app://callback",
        "cur sor://anysphere.cursor-mcp/oauth/callback",
        "cursor://anysphere.cursor-mcp/oauth/callback#fragment",
        "cursor://attacker@anysphere.cursor-mcp/oauth/callback",
        "cursor://anysphere.cursor-mcp/oauth/\u0000callback",
        "cursor:callback",
    ],
)
async def test_registration_refuses_what_is_not_a_private_use_redirect(driver, uri):
    name = "Hostile private-use client"
    # json.dumps escapes the NUL (\\u0000), as a hostile client would send it.
    body = json.dumps(
        {"client_name": name, "redirect_uris": [CURSOR, uri], "token_endpoint_auth_method": "none"}
    )

    response = await driver.http.post(
        "/oauth/register/", content=body.encode(), headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 400, response.text
    assert response.json()["error"] == INVALID_REDIRECT_URI
    assert not await Application.objects.filter(name=name).aexists()


async def test_an_update_may_add_a_private_use_uri_but_not_a_denied_one(driver):
    response = await driver.http.post(
        "/oauth/register/",
        json={
            "client_name": "Updated to Cursor",
            "redirect_uris": ["http://127.0.0.1/cb"],
            "token_endpoint_auth_method": "none",
        },
    )
    registration = response.json()
    path = f"/oauth/register/{registration['client_id']}/"
    metadata = {"client_name": "Updated to Cursor", "token_endpoint_auth_method": "none"}

    refused = await driver.http.put(
        path,
        json={**metadata, "redirect_uris": [CURSOR, "file:///etc/passwd"]},
        headers={"Authorization": f"Bearer {registration['registration_access_token']}"},
    )
    assert refused.status_code == 400
    assert refused.json()["error"] == INVALID_REDIRECT_URI

    updated = await driver.http.put(
        path,
        json={**metadata, "redirect_uris": [CURSOR]},
        headers={"Authorization": f"Bearer {registration['registration_access_token']}"},
    )
    assert updated.status_code == 200, updated.text
    assert updated.json()["redirect_uris"] == [CURSOR]

"""A NUL or invalid UTF-8 in any OAuth or sign-in parameter is refused in the endpoint's own shape
(issue 13, item 6): JSON ``invalid_request`` from the token and revocation endpoints, a plain page
from the authorization endpoint (never a redirect), the sign-in form again from the login page.
Before, each of these reached PostgreSQL, which refuses NUL in text, and answered 500."""

from __future__ import annotations

import base64
from urllib.parse import urlencode

import httpx
import pytest

from tests.e2e.harness import REDIRECT_URI, Person, parse_form
from tests.e2e.oauth_driver import OAuthDriver

pytestmark = pytest.mark.django_db

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _assert_oauth_invalid_request(response: httpx.Response, *, naming: str) -> None:
    assert response.status_code == 400, response.text[:500]
    body = response.json()
    assert body["error"] == "invalid_request"
    assert naming in body["error_description"]


def _assert_refusal_page(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text[:500]
    assert "location" not in response.headers, "never a redirect to an unvalidated redirect_uri"
    assert "text/html" in response.headers["content-type"]
    assert "This request was refused" in response.text


@pytest.mark.parametrize(
    ("body", "naming"),
    [
        ("grant_type=authorization_code&code=a%00b&client_id=CLIENT", "'code'"),
        ("grant_type=authorization_code&code=abc&client_id=a%00b", "'client_id'"),
        ("grant_type=authorization_code&code=a%ffb&client_id=CLIENT", "'code'"),
        ("grant_type=refresh_token&refresh_token=a%00b&client_id=CLIENT", "'refresh_token'"),
        ("grant_type=authorization_code&code=abc&client_id=CLIENT&code_verifier=%c3%28", "'code_verifier'"),
        ("grant_type=authorization_code&code=abc&client_id=CLIENT&x%00=1", "parameter name"),
    ],
)
async def test_the_token_endpoint_refuses_nul_and_invalid_utf8_as_invalid_request(driver, body, naming):
    client_id = await driver.register()
    response = await driver.http.post(
        "/oauth/token/", content=body.replace("CLIENT", client_id).encode(), headers=FORM
    )
    _assert_oauth_invalid_request(response, naming=naming)


async def test_the_token_endpoint_refuses_a_nul_in_the_query_string_too(driver):
    response = await driver.http.post(
        "/oauth/token/?code=a%00b", content=b"grant_type=authorization_code", headers=FORM
    )
    _assert_oauth_invalid_request(response, naming="'code'")


async def test_the_token_endpoint_refuses_a_nul_in_basic_client_credentials(driver):
    credentials = base64.b64encode(b"a%00b:secret").decode()
    response = await driver.http.post(
        "/oauth/token/",
        content=b"grant_type=authorization_code&code=abc",
        headers={**FORM, "Authorization": f"Basic {credentials}"},
    )
    _assert_oauth_invalid_request(response, naming="'client_id'")


async def test_the_revocation_endpoint_refuses_a_nul_in_the_token(driver):
    client_id = await driver.register()
    response = await driver.http.post(
        "/oauth/revoke/", content=f"token=a%00b&client_id={client_id}".encode(), headers=FORM
    )
    _assert_oauth_invalid_request(response, naming="'token'")


@pytest.mark.parametrize(
    "query",
    [
        "client_id=a%00b",
        "client_id=a%ffb",
        "response_type=code&client_id=CLIENT&redirect_uri=http%3A%2F%2Fevil.example%2F%00",
        "response_type=code&client_id=CLIENT&redirect_uri=" + REDIRECT_URI + "&state=%00",
    ],
)
async def test_the_authorization_endpoint_answers_a_plain_page_never_a_redirect(driver, browser, query):
    # Signed in, so the request reaches the authorization request itself, not the login redirect.
    client_id, page = await driver.open_authorization(browser, Person("alice"))
    assert page.status_code == 200
    response = await browser.client.get(f"/oauth/authorize/?{query.replace('CLIENT', client_id)}")
    _assert_refusal_page(response)
    # Signed out, too: nothing is looked up before the refusal.
    anonymous = await driver.http.get(f"/oauth/authorize/?{query.replace('CLIENT', client_id)}")
    _assert_refusal_page(anonymous)


async def test_a_nul_posted_with_the_consent_form_is_refused_with_a_plain_page(driver, browser):
    _, page = await driver.open_authorization(browser, Person("alice"))
    assert page.status_code == 200, page.text[:500]
    form = parse_form(page.text)
    fields = {**form["fields"], "tenant": form["radios"]["tenant"][0], "allow": "Authorize"}
    body = urlencode({**fields, "state": "x\x00y"}).encode()
    response = await browser.client.post(str(page.request.url), content=body, headers=FORM)
    _assert_refusal_page(response)


async def _login_form(client: httpx.AsyncClient) -> dict[str, str]:
    page = await client.get("/accounts/login/")
    assert page.status_code == 200
    return dict(parse_form(page.text)["fields"])


@pytest.mark.parametrize(
    ("username", "password"),
    [("al%00ice", "x"), ("alice", "pass%00word"), ("al%ffice", "x"), ("alice", "x%ed%a0%80")],
)
async def test_the_login_page_answers_its_own_form_for_a_nul_or_invalid_utf8(browser, username, password):
    fields = await _login_form(browser.client)
    body = f"{urlencode(fields)}&username={username}&password={password}".encode()
    response = await browser.client.post("/accounts/login/", content=body, headers=FORM)
    assert response.status_code == 400, response.text[:500]
    form = parse_form(response.text)
    assert "username" in form["fields"] or 'name="username"' in response.text
    assert "parameter" in response.text
    assert "al\x00ice" not in response.text


async def test_the_admin_login_page_answers_its_own_form_too(browser):
    fields = await _login_form(browser.client)
    body = f"{urlencode(fields)}&username=a%00b&password=x".encode()
    response = await browser.client.post("/admin/login/", content=body, headers=FORM)
    assert response.status_code == 400, response.text[:500]
    assert 'name="username"' in response.text


async def test_a_clean_login_and_exchange_still_work(server):
    driver = OAuthDriver(server)
    try:
        tokens = await driver.token_for(Person("alice"))
    finally:
        await driver.aclose()
    assert tokens["access_token"]


async def test_the_login_page_refuses_a_nul_in_next_on_get(browser):
    response = await browser.client.get("/accounts/login/?next=/oauth/authorize/%00")
    assert response.status_code == 400
    assert 'name="username"' in response.text


async def test_a_nul_in_a_multipart_token_request_is_refused_too(driver):
    client_id = await driver.register()
    response = await driver.http.post(
        "/oauth/token/",
        files={"code": (None, "a\x00b")},
        data={"grant_type": "authorization_code", "client_id": client_id},
    )
    _assert_oauth_invalid_request(response, naming="'code'")

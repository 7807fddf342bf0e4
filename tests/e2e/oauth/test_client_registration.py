"""What a client meets before it has a token, over real HTTP: discovery wherever clients probe for
it (and clean JSON 404s where there is nothing), and registered clients using an operator's
redirect pattern."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from oauth2_provider.models import Application

from oauth.discovery import DISCOVERY_NOT_FOUND
from oauth.models import RedirectUriPattern
from tests.e2e.harness import Person, parse_form
from tests.e2e.oauth_driver import pkce_pair

BROWSER_ACCEPT = "text/html,application/xhtml+xml,*/*;q=0.8"


@pytest.mark.parametrize(
    "path",
    ["/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp"],
)
def test_authorization_server_metadata_is_served_at_the_root_and_for_the_mcp_path(server, path):
    response = httpx.get(f"{server.base_url}{path}", timeout=10)

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["issuer"] == server.base_url
    assert response.json()["client_id_metadata_document_supported"] is True


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
def test_protected_resource_metadata_is_served_at_the_root_and_for_the_mcp_path(server, path):
    response = httpx.get(f"{server.base_url}{path}", timeout=10)

    assert response.status_code == 200
    assert response.json()["resource"] == server.mcp_url


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/openid-configuration",
        "/.well-known/openid-configuration/",
        "/.well-known/openid-configuration/mcp",
        "/mcp/.well-known/openid-configuration",
        "/mcp/.well-known/oauth-authorization-server",
        "/.well-known/oauth-authorization-server/",
        "/.well-known/oauth-authorization-server/other",
        "/.well-known/oauth-protected-resource/other",
        "/.well-known/oauth-protected-resource/mcp/tools",
        "/.well-known/jwks.json",
        "/.well-known/security.txt",
    ],
)
@pytest.mark.parametrize("accept", ["application/json", BROWSER_ACCEPT])
def test_every_other_well_known_probe_gets_a_json_404_never_a_page(server, path, accept):
    response = httpx.get(f"{server.base_url}{path}", headers={"Accept": accept}, timeout=10)

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "not_found", "error_description": DISCOVERY_NOT_FOUND}


def test_a_post_to_a_missing_discovery_document_is_a_json_404_too(server):
    response = httpx.post(f"{server.base_url}/.well-known/openid-configuration", timeout=10)

    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


async def test_a_registered_client_reaches_a_callback_its_operator_pattern_admits(driver, browser, committed):
    first = "https://connectors.example/connector/oauth/first"
    second = "https://connectors.example/connector/oauth/second"
    client_id = await driver.register(redirect_uris=[first])

    def pattern() -> RedirectUriPattern:
        application = Application.objects.get(client_id=client_id)
        return RedirectUriPattern.objects.create(
            pattern="https://connectors.example/connector/oauth/*", application=application
        )

    committed(pattern)
    _, challenge = pkce_pair()
    alice = Person("alice")
    page = await browser.open(
        driver.authorize_url(client_id=client_id, challenge=challenge, redirect_uri=second),
        username=alice.username,
        password=alice.password,
    )
    assert page.status_code == 200
    assert parse_form(page.text)["fields"]["redirect_uri"] == second

    response = await browser.decide(page)

    assert response.status_code == 302
    location = urlsplit(response.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == second


async def test_a_registered_client_cannot_use_a_callback_beside_its_pattern(driver, browser, committed):
    client_id = await driver.register(redirect_uris=["https://connectors.example/connector/oauth/first"])

    def pattern() -> RedirectUriPattern:
        application = Application.objects.get(client_id=client_id)
        return RedirectUriPattern.objects.create(
            pattern="https://connectors.example/connector/oauth/*", application=application
        )

    committed(pattern)
    _, challenge = pkce_pair()
    alice = Person("alice")
    response = await browser.open(
        driver.authorize_url(
            client_id=client_id,
            challenge=challenge,
            redirect_uri="https://connectors.example/connector/oauth/second/../../steal",
        ),
        username=alice.username,
        password=alice.password,
    )

    assert response.status_code == 400
    assert "location" not in response.headers


@pytest.mark.django_db
@pytest.mark.parametrize(
    "redirect_uri",
    ["http://client.example/callback", "ftp://client.example/callback", "javascript:alert(1)", "/callback"],
)
async def test_registration_refuses_a_redirect_uri_that_is_not_https_or_loopback(driver, redirect_uri):
    response = await driver.http.post(
        "/oauth/register/",
        json={
            "client_name": "Careless client",
            "redirect_uris": ["https://client.example/ok", redirect_uri],
            "token_endpoint_auth_method": "none",
        },
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    assert redirect_uri in response.json()["error_description"]
    assert not await Application.objects.filter(name="Careless client").aexists()


@pytest.mark.django_db
async def test_registration_accepts_https_and_loopback_http_redirect_uris(driver):
    client_id = await driver.register(
        redirect_uris=["https://client.example/callback", "http://127.0.0.1/callback", "http://localhost/cb"]
    )
    assert await Application.objects.filter(client_id=client_id).aexists()

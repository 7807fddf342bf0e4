"""The REST API is a protected resource of its own: its discovery document, tokens for it through
the authorization-code flow, and tokens bound to one resource opening only that one."""

from __future__ import annotations

import httpx
import pytest

from core.errors import AuthenticationFailed
from mcp_gateway.transport.bearer import identity_from_bearer
from oauth.authorize import ONE_RESOURCE_ONLY
from oauth.bearer import TOKEN_WRONG_RESOURCE, identity_from_api_bearer
from tests.e2e.harness import Browser, Person, redirect_params
from tests.e2e.oauth_driver import pkce_pair
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("resolve_here")]


def api_url(server) -> str:
    return f"{server.public_url}/api"


def test_the_api_has_its_own_protected_resource_metadata(server):
    response = httpx.get(f"{server.base_url}/.well-known/oauth-protected-resource/api", timeout=10)

    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.json() == {
        "resource": f"{server.base_url}/api",
        "authorization_servers": [server.base_url],
        "scopes_supported": ["llm:invoke"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Gatehouse API",
    }


def test_the_api_metadata_names_the_scope_the_gateway_registers():
    from llm_gateway.scopes import SCOPE_LLM_INVOKE
    from oauth.resource import API_SCOPES

    assert API_SCOPES == (SCOPE_LLM_INVOKE,)


def test_a_path_under_the_api_metadata_is_not_a_document(server):
    response = httpx.get(f"{server.base_url}/.well-known/oauth-protected-resource/api/extra", timeout=10)
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


async def _mcp_status(driver, access_token: str) -> int:
    response = await driver.http.post(
        "/mcp", json=initialize_body(), headers={**MCP_HEADERS, "authorization": f"Bearer {access_token}"}
    )
    return response.status_code


async def test_a_person_gets_an_api_token_that_mcp_refuses(driver):
    tokens = await driver.token_for(
        Person("alice"), scope="llm:invoke mcp:read", resource=api_url(driver.server)
    )

    assert tokens["scope"] == "llm:invoke mcp:read"
    assert await _mcp_status(driver, tokens["access_token"]) == 401
    identity = await identity_from_api_bearer(raw_token=tokens["access_token"])
    assert (identity.username, identity.tenant_slug, identity.role) == ("alice", "acme", "admin")
    assert identity.scopes == frozenset({"llm:invoke", "mcp:read"})
    with pytest.raises(AuthenticationFailed, match=TOKEN_WRONG_RESOURCE):
        await identity_from_bearer(raw_token=tokens["access_token"], session_id=None)


async def test_an_mcp_token_resolves_for_mcp_and_not_for_the_api(driver):
    tokens = await driver.token_for(Person("alice"))

    identity, _ = await identity_from_bearer(raw_token=tokens["access_token"], session_id=None)
    assert identity.tenant_slug == "acme"
    with pytest.raises(AuthenticationFailed, match=TOKEN_WRONG_RESOURCE) as refused:
        await identity_from_api_bearer(raw_token=tokens["access_token"])
    # The same refusal data as the MCP path's, for the audit row: which token, never its value.
    assert set(refused.value.data or {}) == {"tokenId", "userId", "tenantId", "applicationId"}


async def test_a_token_without_a_resource_is_for_mcp(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))
    response = await driver.http.post(
        "/oauth/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": "http://127.0.0.1:9/callback",
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    assert response.status_code == 200, response.text
    identity, _ = await identity_from_bearer(raw_token=response.json()["access_token"], session_id=None)
    assert identity.username == "alice"


async def test_asking_for_both_resources_at_once_is_refused(driver, browser):
    _, response = await driver.open_authorization(
        browser, Person("alice"), resource=[driver.server.resource_url, api_url(driver.server)]
    )

    params = redirect_params(response)
    assert params["error"] == "invalid_target"
    assert params["error_description"] == ONE_RESOURCE_ONLY


async def test_another_resource_is_refused_with_the_two_we_serve_named(driver, browser):
    _, response = await driver.open_authorization(
        browser, Person("alice"), resource=f"{driver.server.public_url}/apix"
    )

    params = redirect_params(response)
    assert params["error"] == "invalid_target"
    assert driver.server.resource_url in params["error_description"]
    assert api_url(driver.server) in params["error_description"]


async def test_a_code_granted_for_mcp_cannot_be_exchanged_for_an_api_token(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"), scope="llm:invoke")

    response = await driver.exchange(
        client_id=client_id, code=code, verifier=verifier, resource=api_url(driver.server)
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


async def test_a_code_granted_for_the_api_cannot_be_exchanged_for_an_mcp_token(driver):
    client_id, code, verifier = await driver.code_for(
        Person("alice"), scope="llm:invoke", resource=api_url(driver.server)
    )

    response = await driver.exchange(client_id=client_id, code=code, verifier=verifier)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


async def test_a_refreshed_api_token_stays_an_api_token(driver):
    tokens = await driver.token_for(Person("alice"), scope="llm:invoke", resource=api_url(driver.server))

    refreshed = await driver.http.post(
        "/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": tokens["client_id"],
        },
    )
    assert refreshed.status_code == 200, refreshed.text
    identity = await identity_from_api_bearer(raw_token=refreshed.json()["access_token"])
    assert identity.username == "alice"
    assert await _mcp_status(driver, refreshed.json()["access_token"]) == 401


async def test_a_refresh_cannot_move_an_api_token_to_mcp(driver):
    tokens = await driver.token_for(Person("alice"), scope="llm:invoke", resource=api_url(driver.server))

    refreshed = await driver.http.post(
        "/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": tokens["client_id"],
            "resource": driver.server.resource_url,
        },
    )
    assert refreshed.status_code == 400
    assert refreshed.json()["error"] == "invalid_target"


async def test_a_viewer_asking_for_llm_invoke_on_the_api_is_refused(driver):
    # bob is a viewer: llm:invoke is for admins and contributors, so his role grants none of it.
    client_id = await driver.register()
    _, challenge = pkce_pair()
    browser = Browser(driver.server.base_url)
    try:
        response = await browser.authorize(
            driver.authorize_url(
                client_id=client_id, challenge=challenge, scope="llm:invoke", resource=api_url(driver.server)
            ),
            username="bob",
            password=Person("bob").password,
        )
    finally:
        await browser.aclose()
    assert redirect_params(response)["error"] == "access_denied"


async def test_the_consent_page_says_when_the_token_is_for_the_api(driver, browser):
    _, for_api = await driver.open_authorization(
        browser, Person("alice"), scope="llm:invoke", resource=api_url(driver.server)
    )
    _, for_mcp = await driver.open_authorization(browser, Person("alice"))

    assert for_api.status_code == 200, for_api.text[:500]
    assert "through the REST API" in for_api.text
    assert for_mcp.status_code == 200, for_mcp.text[:500]
    assert "through the REST API" not in for_mcp.text

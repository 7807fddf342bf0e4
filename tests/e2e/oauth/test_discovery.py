"""What a client that knows only the URL finds: the documents it discovers authentication from."""

from __future__ import annotations

import httpx
import pytest


def test_the_authorization_server_metadata_advertises_what_mcp_clients_need(server):
    response = httpx.get(f"{server.base_url}/.well-known/oauth-authorization-server", timeout=10)
    assert response.status_code == 200
    metadata = response.json()
    assert metadata["issuer"] == server.base_url
    assert metadata["authorization_endpoint"] == f"{server.base_url}/oauth/authorize/"
    assert metadata["token_endpoint"] == f"{server.base_url}/oauth/token/"
    assert metadata["registration_endpoint"] == f"{server.base_url}/oauth/register/"
    assert metadata["revocation_endpoint"] == f"{server.base_url}/oauth/revoke/"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["response_types_supported"] == ["code"]
    assert set(metadata["grant_types_supported"]) == {
        "authorization_code",
        "refresh_token",
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
    }
    assert metadata["authorization_grant_profiles_supported"] == [
        "urn:ietf:params:oauth:grant-profile:id-jag"
    ]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["scopes_supported"] == [
        "data_agent:write",
        "llm:invoke",
        "mcp:read",
        "mcp:write",
        "ontologies:read",
        "usage:read",
        "workflows:agent",
        "workflows:read",
        "workflows:run",
    ]


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
)
def test_the_protected_resource_metadata_names_the_mcp_endpoint(server, path):
    response = httpx.get(f"{server.base_url}{path}", timeout=10)
    assert response.status_code == 200
    assert response.json() == {
        "resource": server.mcp_url,
        "authorization_servers": [server.base_url],
        "scopes_supported": [
            "data_agent:write",
            "llm:invoke",
            "mcp:read",
            "mcp:write",
            "ontologies:read",
            "usage:read",
            "workflows:agent",
            "workflows:read",
            "workflows:run",
        ],
        "bearer_methods_supported": ["header"],
        "resource_name": "Gatehouse MCP",
    }


def test_the_login_page_has_the_fields_people_and_password_managers_expect(server):
    page = httpx.get(f"{server.base_url}/accounts/login/", timeout=10)
    assert page.status_code == 200
    assert 'name="username"' in page.text
    assert 'name="password"' in page.text
    assert 'autocomplete="current-password"' in page.text


async def test_a_wrong_password_shows_an_error_and_no_session(server):
    async with httpx.AsyncClient(base_url=server.base_url, follow_redirects=False, timeout=10) as browser:
        page = await browser.get("/accounts/login/")
        token = page.cookies.get("csrftoken") or browser.cookies.get("csrftoken")
        response = await browser.post(
            "/accounts/login/",
            data={"username": "alice", "password": "wrong", "csrfmiddlewaretoken": token},
        )
    assert response.status_code == 200
    assert "did not match" in response.text
    assert "sessionid" not in response.cookies

"""CORS on the Django side (django-cors-headers, core.cors): the OAuth endpoints a browser client
fetches answer allowed origins; discovery documents answer any origin; the pages a person
navigates to (login, consent, admin) answer none."""

from __future__ import annotations

import json

import pytest

from oauth.discovery import DISCOVERY_NOT_FOUND

PUBLIC_URL = "https://gatehouse.example"
ALLOWED = "https://inspector.example"
FOREIGN = "https://evil.example"
DISCOVERY = [
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource/api",
]
NOT_SERVED = ["/.well-known/openid-configuration", "/mcp/.well-known/openid-configuration"]
CLIENT_ENDPOINTS = [
    "/oauth/token/",
    "/oauth/revoke/",
    "/oauth/register/",
    "/oauth/register/some-client/",
    # Shown failing before: the REST API answered a preflight 405 (its paths were not CORS's).
    "/api/v1/llm/invoke",
    "/api/v1/providers",
]
PAGES = ["/accounts/login/", "/oauth/authorize/", "/admin/", "/admin/login/", "/accounts/connected/", "/"]


@pytest.fixture(autouse=True)
def allowed_origin(settings):
    """A server on a public host, so that the loopback rule of development is out of the way."""
    settings.PUBLIC_URL = PUBLIC_URL
    settings.CORS_ALLOWED_ORIGINS = [PUBLIC_URL, ALLOWED]


def _preflight(client, path: str, origin: str, method: str = "POST"):
    return client.options(
        path,
        headers={
            "origin": origin,
            "access-control-request-method": method,
            "access-control-request-headers": "authorization, content-type, mcp-protocol-version",
        },
    )


def _allow_origin(response) -> str | None:
    return response.headers.get("access-control-allow-origin")


@pytest.mark.parametrize("path", CLIENT_ENDPOINTS)
def test_an_allowed_origin_s_preflight_to_a_client_endpoint_is_answered(client, path):
    response = _preflight(client, path, ALLOWED)

    assert response.status_code == 200
    assert _allow_origin(response) == ALLOWED
    allowed_headers = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version", "mcp-session-id"} <= allowed_headers
    assert {"POST", "OPTIONS"} <= set(response.headers["access-control-allow-methods"].split(", "))
    assert "access-control-allow-credentials" not in response.headers
    assert "origin" in response.headers["vary"].lower()


@pytest.mark.parametrize("path", CLIENT_ENDPOINTS)
def test_a_foreign_origin_s_preflight_to_a_client_endpoint_gets_no_allow_headers(client, path):
    response = _preflight(client, path, FOREIGN)

    assert _allow_origin(response) is None
    assert "access-control-allow-headers" not in response.headers
    assert "access-control-allow-methods" not in response.headers


def test_the_token_endpoint_s_answer_is_readable_by_an_allowed_origin_only(client, db):
    form = {
        "grant_type": "authorization_code",
        "code": "nope",
        "client_id": "nobody",
        "code_verifier": "x" * 43,
    }

    allowed = client.post("/oauth/token/", form, headers={"origin": ALLOWED})
    foreign = client.post("/oauth/token/", form, headers={"origin": FOREIGN})

    assert allowed.status_code == foreign.status_code == 401
    assert _allow_origin(allowed) == ALLOWED
    assert "WWW-Authenticate" in allowed.headers["access-control-expose-headers"]
    assert _allow_origin(foreign) is None


def test_a_registration_from_an_allowed_origin_is_readable_there(client, db):
    response = client.post(
        "/oauth/register/",
        json.dumps(
            {
                "client_name": "Browser client",
                "redirect_uris": ["http://127.0.0.1:6274/oauth/callback"],
                "token_endpoint_auth_method": "none",
            }
        ),
        content_type="application/json",
        headers={"origin": ALLOWED},
    )

    assert response.status_code == 201, response.content
    assert _allow_origin(response) == ALLOWED


@pytest.mark.parametrize("path", DISCOVERY)
@pytest.mark.parametrize("origin", [ALLOWED, FOREIGN, "null"])
def test_discovery_documents_are_readable_from_any_origin(client, path, origin):
    response = client.get(path, headers={"origin": origin})

    assert response.status_code == 200
    assert _allow_origin(response) == origin
    assert "origin" in response.headers["vary"].lower()


@pytest.mark.parametrize("path", DISCOVERY + NOT_SERVED)
def test_a_discovery_preflight_is_answered_for_any_origin(client, path):
    # The MCP SDKs send MCP-Protocol-Version with their discovery requests: a preflight first.
    response = _preflight(client, path, FOREIGN, method="GET")

    assert response.status_code == 200
    assert _allow_origin(response) == FOREIGN
    assert "mcp-protocol-version" in response.headers["access-control-allow-headers"]


@pytest.mark.parametrize("path", NOT_SERVED)
def test_a_missing_discovery_document_is_a_404_the_page_can_read(client, path):
    response = client.get(path, headers={"origin": FOREIGN})

    assert response.status_code == 404
    assert response.json()["error_description"] == DISCOVERY_NOT_FOUND
    assert _allow_origin(response) == FOREIGN


def test_discovery_without_an_origin_keeps_dot_s_own_wildcard(client):
    # Not a browser's cross-origin request: nothing for the policy to decide; DOT's "*" stays.
    response = client.get("/.well-known/oauth-protected-resource/mcp")

    assert _allow_origin(response) == "*"


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("origin", [ALLOWED, PUBLIC_URL])
def test_the_pages_a_person_navigates_to_never_answer_cors(client, path, origin):
    preflight = _preflight(client, path, origin)
    get = client.get(path, headers={"origin": origin})

    for response in (preflight, get):
        assert not [name for name in response.headers if name.lower().startswith("access-control-")]


@pytest.mark.parametrize(
    "origin",
    [
        "null",
        "https://inspector.example.evil.example",
        "https://evil.example/https://inspector.example",
        "http://inspector.example",
        "https://inspector.example:8443",
        "https://" + "a" * 10_000 + ".example",
    ],
)
def test_an_origin_that_is_not_exactly_an_allowed_one_is_not_answered(client, origin):
    response = _preflight(client, "/oauth/token/", origin)

    assert _allow_origin(response) is None


def test_on_a_loopback_server_any_loopback_origin_is_allowed(client, settings):
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    settings.CORS_ALLOWED_ORIGINS = [settings.PUBLIC_URL]

    inspector = _preflight(client, "/oauth/token/", "http://localhost:6274")
    other_loopback = _preflight(client, "/oauth/register/", "http://127.0.0.2:3000")
    public = _preflight(client, "/oauth/token/", FOREIGN)

    assert _allow_origin(inspector) == "http://localhost:6274"
    assert _allow_origin(other_loopback) == "http://127.0.0.2:3000"
    assert _allow_origin(public) is None


def test_on_a_public_server_a_loopback_origin_needs_to_be_listed(client):
    response = _preflight(client, "/oauth/token/", "http://localhost:6274")

    assert _allow_origin(response) is None


def test_an_api_answer_is_readable_by_an_allowed_origin_only(client, db):
    for origin, readable in ((ALLOWED, True), (FOREIGN, False)):
        response = client.get("/api/v1/providers", headers={"origin": origin})
        assert response.status_code == 401  # no token: the API's own answer, with CORS on top
        assert (_allow_origin(response) == origin) is readable

"""Private-use URI scheme redirects (RFC 8252 §7.1), such as Cursor's: which schemes pass, what the
operator's setting changes, and that a registered one is matched exactly and opened to no other
client. The whole flow over real HTTP is tests/e2e/oauth/test_private_use_redirects_cursor.py."""

from __future__ import annotations

import pytest
from django.core.exceptions import DisallowedRedirect, ImproperlyConfigured, ValidationError
from django.test import Client
from oauth2_provider.http import OAuth2ResponseRedirect
from oauth2_provider.models import Application

from core.env import env_uri_schemes
from core.uri_schemes import SCHEME_DENIED, SCHEME_SYNTAX, private_use_scheme_refusal
from oauth.authorize import LOOPBACK_WARNING
from oauth.redirects import redirect_schemes_allowed, redirect_uri_permitted
from oauth.registration_policy import (
    INVALID_REDIRECT_URI,
    PRIVATE_USE_SHAPE,
    UNSAFE_REDIRECT,
    UNSAFE_REDIRECT_WEB_ONLY,
    RedirectUriRefused,
    client_metadata_check,
)
from tests.support.factories import ApplicationFactory
from tests.support.oauth_support import authorize

pytestmark = pytest.mark.django_db

CURSOR = "cursor://anysphere.cursor-mcp/oauth/callback"
REVERSE_DOMAIN = "com.example.app:/oauth2redirect"


@pytest.fixture
def signed_in(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


@pytest.fixture
def cursor() -> Application:
    return ApplicationFactory.create(
        redirect_uris=CURSOR, registration_source=Application.RegistrationSource.DCR
    )


def _only_schemes(settings, schemes: list[str]) -> None:
    settings.GATEHOUSE = {**settings.GATEHOUSE, "OAUTH_PRIVATE_USE_SCHEMES": schemes}


def _refusal(uri: str) -> RedirectUriRefused:
    with pytest.raises(RedirectUriRefused) as refused:
        client_metadata_check({"redirect_uris": ["https://client.example/cb", uri]})
    assert refused.value.oauth_error == INVALID_REDIRECT_URI
    return refused.value


# --- which schemes ------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["cursor", "vscode", "vscode-insiders", "com.example.app", "x+y.z-1"])
def test_an_apps_own_scheme_may_be_private_use(scheme):
    assert private_use_scheme_refusal(scheme) is None


@pytest.mark.parametrize(
    "scheme",
    [
        "javascript", "JavaScript", "JAVASCRIPT", "data", "file", "vbscript", "about", "blob",
        "filesystem", "view-source", "chrome", "chrome-extension", "intent", "ws", "wss", "ftp",
        "mailto", "tel", "sms", "search-ms", "ms-msdt", "MS-Settings", "x-apple.systempreferences",
        "http", "https", "HTTPS", "https-login", "http+unix",
    ],
)  # fmt: skip
def test_a_scheme_with_a_meaning_of_its_own_is_never_private_use(scheme):
    assert private_use_scheme_refusal(scheme) == SCHEME_DENIED


@pytest.mark.parametrize("scheme", ["c", "1app", "my_app", "my app", "app\x00", "", "ćursor", "-app", "a/b"])
def test_what_is_not_a_scheme_is_refused(scheme):
    assert private_use_scheme_refusal(scheme) == SCHEME_SYNTAX


# --- the operator's setting ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ["*"]), ("*", ["*"]), ("none", []), ("NONE", []), ("Cursor, vscode", ["cursor", "vscode"])],
)
def test_the_setting_reads_any_none_or_a_list(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("OAUTH_PRIVATE_USE_SCHEMES", raising=False)
    else:
        monkeypatch.setenv("OAUTH_PRIVATE_USE_SCHEMES", value)

    assert env_uri_schemes("OAUTH_PRIVATE_USE_SCHEMES", default=["*"]) == expected


@pytest.mark.parametrize("value", ["javascript", "cursor,file", "my_app", "*,cursor", "c"])
def test_the_setting_refuses_a_scheme_that_could_never_pass_at_start(monkeypatch, value):
    monkeypatch.setenv("OAUTH_PRIVATE_USE_SCHEMES", value)

    with pytest.raises(ImproperlyConfigured):
        env_uri_schemes("OAUTH_PRIVATE_USE_SCHEMES", default=["*"])


def test_with_private_use_off_registration_and_authorization_refuse_it(settings, signed_in, cursor):
    _only_schemes(settings, [])

    assert _refusal(CURSOR).message == f"{UNSAFE_REDIRECT_WEB_ONLY} {CURSOR}"
    # A client that registered it while it was allowed can no longer be sent there.
    response = authorize(signed_in, client_id=cursor.client_id, redirect_uri=CURSOR)
    assert response.status_code == 400
    assert "Location" not in response.headers


def test_a_list_allows_its_schemes_and_no_other(settings, signed_in, cursor):
    _only_schemes(settings, ["vscode"])

    client_metadata_check({"redirect_uris": ["vscode://vscode.github-authentication/did-authenticate"]})
    assert _refusal(CURSOR).message == f"{UNSAFE_REDIRECT} {CURSOR}"
    assert not redirect_uri_permitted(application=cursor, redirect_uri=CURSOR)


# --- registration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        CURSOR,
        REVERSE_DOMAIN,
        "vscode://vscode.github-authentication/did-authenticate",
        "cursor://anysphere.cursor-mcp/oauth/callback?client=desktop",
    ],
)
def test_registration_accepts_a_private_use_redirect_uri(uri):
    client_metadata_check({"redirect_uris": [uri, "https://www.cursor.com/agents/mcp/oauth/callback"]})


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(document.domain)",
        "JavaScript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "vbscript:msgbox(1)",
        "ms-msdt:/id",
        "my_app://callback/x",
        "1app://callback/x",
        "c:/Windows/System32/calc.exe",
        "https-login://bank.example/cb",
        "://anysphere.cursor-mcp/oauth/callback",
    ],
)
def test_registration_refuses_a_scheme_that_is_not_private_use(uri):
    assert _refusal(uri).message == f"{UNSAFE_REDIRECT} {uri}"


@pytest.mark.parametrize(
    "uri",
    [
        "cursor://anysphere.cursor-mcp/oauth/callback#frag",
        "cursor://anysphere.cursor-mcp/oauth/callback#",
        "cursor://evil@anysphere.cursor-mcp/oauth/callback",
        "cursor://user:pass@anysphere.cursor-mcp/oauth/callback",
        "cursor://anysphere.cursor-mcp/oauth/\x00callback",
        "cursor\x00://anysphere.cursor-mcp/oauth/callback",
        "java\tscript:alert(1)",
        "cursor://anysphere.cursor-mcp/oauth/\ud800",
        "cursor://anysphere.cursor-mcp/oauth/call back",
    ],
)
def test_registration_refuses_a_private_use_uri_with_a_fragment_userinfo_or_odd_characters(uri):
    _refusal(uri)


@pytest.mark.parametrize("uri", ["cursor:callback", "cursor:///oauth/callback", "cursor://", "cursor:"])
def test_registration_refuses_a_private_use_uri_without_a_host_or_path(uri):
    assert _refusal(uri).message == f"{PRIVATE_USE_SHAPE} {uri}"


def test_the_model_accepts_a_private_use_uri_and_refuses_a_denied_scheme():
    """The admin and DOT's registration views save through Application.clean()."""
    Application(
        name="Cursor",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=CURSOR,
    ).full_clean(exclude=["client_secret"])

    with pytest.raises(ValidationError):
        Application(
            name="Evil",
            client_type="public",
            authorization_grant_type="authorization-code",
            redirect_uris="javascript://anysphere.cursor-mcp/%0aalert(1)",
        ).full_clean(exclude=["client_secret"])


# --- authorization ------------------------------------------------------------------------------


def test_the_registered_uri_reaches_the_consent_page_which_names_the_scheme(signed_in, cursor):
    response = authorize(signed_in, client_id=cursor.client_id, redirect_uri=CURSOR)

    assert response.status_code == 200
    page = response.content.decode()
    assert '<span class="host">cursor://anysphere.cursor-mcp</span>' in page
    assert LOOPBACK_WARNING in page


def test_an_authority_less_uri_is_shown_by_its_scheme(signed_in):
    application = ApplicationFactory.create(redirect_uris=REVERSE_DOMAIN)

    response = authorize(signed_in, client_id=application.client_id, redirect_uri=REVERSE_DOMAIN)

    assert response.status_code == 200
    assert '<span class="host">com.example.app:</span>' in response.content.decode()


@pytest.mark.parametrize(
    "redirect_uri",
    [
        pytest.param("cursor://anysphere.cursor-mcp/oauth/callbacc", id="one-character"),
        pytest.param("cursor://anysphere.cursor-mcp/oauth/callback/", id="trailing-slash"),
        pytest.param("Cursor://anysphere.cursor-mcp/oauth/callback", id="scheme-case"),
        pytest.param("cursor://Anysphere.cursor-mcp/oauth/callback", id="host-case"),
        pytest.param("cursor://anysphere.cursor-mcp/oauth/callback?x=1", id="query"),
        pytest.param("cursor://anysphere.cursor-mcp/oauth/callback#x", id="fragment"),
        pytest.param("cursor://evil@anysphere.cursor-mcp/oauth/callback", id="userinfo"),
        pytest.param("cursor://anysphere.cursor-mcp:8080/oauth/callback", id="port"),
        pytest.param("cursor://attacker.example/oauth/callback", id="other-host"),
        pytest.param("cursor:/oauth/callback", id="no-authority"),
        pytest.param("evil://anysphere.cursor-mcp/oauth/callback", id="other-scheme"),
        pytest.param("javascript://anysphere.cursor-mcp/oauth/callback", id="javascript"),
        pytest.param("https://anysphere.cursor-mcp/oauth/callback", id="https"),
        pytest.param("http://127.0.0.1/oauth/callback", id="loopback"),
    ],
)
def test_anything_but_the_exact_uri_is_refused_without_a_redirect(signed_in, cursor, redirect_uri):
    response = authorize(signed_in, client_id=cursor.client_id, redirect_uri=redirect_uri)

    assert response.status_code == 400
    assert "Location" not in response.headers


def test_a_client_is_never_sent_through_a_scheme_it_did_not_register(cursor):
    other = ApplicationFactory.create(redirect_uris="https://client.example/cb")

    assert redirect_schemes_allowed(application=cursor) == ["https", "http", "cursor"]
    assert other.get_allowed_schemes() == ["https", "http"]
    assert not redirect_uri_permitted(application=other, redirect_uri=CURSOR)
    OAuth2ResponseRedirect(f"{CURSOR}?code=x", cursor.get_allowed_schemes())
    with pytest.raises(DisallowedRedirect):
        OAuth2ResponseRedirect(f"{CURSOR}?code=x", other.get_allowed_schemes())


def test_a_denied_scheme_stored_anyway_opens_no_redirect():
    """A row written around the policy (a hand-edited database) still gets nothing."""
    stored = ApplicationFactory.create(redirect_uris="javascript://x/%0aalert(1) data://x/y")

    assert stored.get_allowed_schemes() == ["https", "http"]
    assert not redirect_uri_permitted(application=stored, redirect_uri="javascript://x/%0aalert(1)")

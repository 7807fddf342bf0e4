"""Every page sends the strict Content-Security-Policy; the pages of an authorization request also
let their form lead to the client's registered redirect URI, and to nothing else."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from core.csp import redirect_source
from tests.support.factories import ApplicationFactory

pytestmark = pytest.mark.django_db

REDIRECT_URI = "http://127.0.0.1:7777/callback"


def _policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {name: values for name, *values in (part.split() for part in header.split(";") if part.strip())}


def test_the_sign_in_page_sends_a_strict_policy_and_its_inline_style_carries_the_nonce(client):
    response = client.get("/accounts/login/")
    policy = _policy(response)
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["form-action"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    [nonce] = re.findall(r'<style nonce="([^"]+)">', response.content.decode())
    assert f"'nonce-{nonce}'" in policy["style-src"]


def test_json_endpoints_send_it_too(client):
    assert _policy(client.get("/health"))["default-src"] == ["'none'"]


def _login_page_for(client, *, client_id: str, redirect_uri: str):
    query = urlencode({"client_id": client_id, "redirect_uri": redirect_uri, "response_type": "code"})
    return client.get("/accounts/login/", {"next": f"/oauth/authorize/?{query}"})


def test_the_sign_in_page_of_an_authorization_request_allows_the_registered_redirect_uri(client):
    application = ApplicationFactory.create(redirect_uris=REDIRECT_URI)
    response = _login_page_for(client, client_id=application.client_id, redirect_uri=REDIRECT_URI)
    assert _policy(response)["form-action"] == ["'self'", "http://127.0.0.1:7777"]


def test_a_redirect_uri_the_client_did_not_register_is_not_allowed(client):
    application = ApplicationFactory.create(redirect_uris=REDIRECT_URI)
    for client_id, redirect_uri in (
        (application.client_id, "https://evil.example/callback"),
        ("no-such-client", REDIRECT_URI),
        (application.client_id + "\x00", REDIRECT_URI),
    ):
        response = _login_page_for(client, client_id=client_id, redirect_uri=redirect_uri)
        assert _policy(response)["form-action"] == ["'self'"]


@pytest.mark.parametrize(
    ("redirect_uri", "source"),
    [
        ("http://127.0.0.1:9/callback?x=1", "http://127.0.0.1:9"),
        ("https://Client.Example/cb", "https://client.example"),
        ("http://[::1]:8080/cb", "http://[::1]:8080"),
        ("cursor://anysphere.cursor-retrieval/oauth/callback", "cursor:"),
        ("javascript://x/%0aalert(1)", None),
        ("Data://x/y", None),
        ("http://a b;script-src *", None),
        ("http://127.0.0.1:99999/cb", None),
    ],
)
def test_a_redirect_uri_becomes_a_source_only_when_it_can_safely(redirect_uri, source):
    assert redirect_source(redirect_uri) == source

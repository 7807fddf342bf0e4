"""Redirect URIs: exact match, loopback on any port (RFC 8252), and the operators' patterns; every
near miss an attacker might try is refused without a redirect."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from oauth2_provider.models import Application

from oauth.redirect_patterns import (
    PATTERN_EXTRA,
    PATTERN_HOST,
    PATTERN_PATH,
    PATTERN_SCHEME,
    redirect_pattern_matches,
    redirect_pattern_validate,
)
from oauth.redirects import redirect_uri_permitted
from tests.support.factories import ApplicationFactory, RedirectUriPatternFactory
from tests.support.oauth_support import authorize

pytestmark = pytest.mark.django_db

REGISTERED = "https://client.example/callback"
LOOPBACK_V4 = "http://127.0.0.1/callback"
LOOPBACK_V6 = "http://[::1]/cb"
LOCALHOST = "http://localhost/cb"
CONNECTOR = "https://connectors.example/connector/oauth/first"
CONNECTOR_PATTERN = "https://connectors.example/connector/oauth/*"


def _authorize(browser: Client, *, client_id: str, redirect_uri: str):
    return authorize(browser, client_id=client_id, redirect_uri=redirect_uri)


@pytest.fixture
def signed_in(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


@pytest.fixture
def application() -> Application:
    return ApplicationFactory.create(
        redirect_uris=" ".join([REGISTERED, LOOPBACK_V4, LOOPBACK_V6, LOCALHOST]),
        registration_source=Application.RegistrationSource.DCR,
    )


@pytest.mark.parametrize(
    "redirect_uri",
    [
        REGISTERED,
        "http://127.0.0.1:53412/callback",
        "http://127.0.0.1/callback",
        "http://[::1]:8080/cb",
        "http://localhost:3000/cb",
    ],
)
def test_the_registered_uri_and_loopback_on_any_port_reach_the_consent_page(
    signed_in, application, redirect_uri
):
    response = _authorize(signed_in, client_id=application.client_id, redirect_uri=redirect_uri)

    assert response.status_code == 200
    assert b'name="tenant"' in response.content


@pytest.mark.parametrize(
    "redirect_uri",
    [
        pytest.param("https://client.example/callback/", id="trailing-slash"),
        pytest.param("https://client.example/Callback", id="path-case"),
        pytest.param("https://CLIENT.example/callback", id="host-case"),
        pytest.param("HTTPS://client.example/callback", id="scheme-case"),
        pytest.param("https://client.example/callback/extra", id="extra-path"),
        pytest.param("https://client.example/callbackextra", id="longer-segment"),
        pytest.param("https://client.example/callback;x=1", id="path-parameter"),
        pytest.param("https://client.example/%63allback", id="percent-encoded"),
        pytest.param("https://client.example/other/../callback", id="dot-segments"),
        pytest.param("https://attacker@client.example/callback", id="userinfo"),
        pytest.param("https://client.example:8443/callback", id="other-port"),
        pytest.param("https://client.example:443/callback", id="explicit-default-port"),
        pytest.param("https://client.example/callback#frag", id="fragment"),
        pytest.param("https://client.example/callback#", id="empty-fragment"),
        pytest.param("https://client.example/callback?next=https://attacker.example", id="query"),
        pytest.param("https://client.example/callback?", id="empty-query"),
        pytest.param("http://client.example/callback", id="downgraded-scheme"),
        pytest.param("https://client.example.attacker.example/callback", id="suffix-host"),
        pytest.param("https://attacker.example/callback", id="other-host"),
        pytest.param("http://127.0.0.1:53412/other", id="loopback-other-path"),
        pytest.param("https://127.0.0.1:53412/callback", id="loopback-other-scheme"),
        pytest.param("http://127.0.0.2:53412/callback", id="loopback-other-address"),
        pytest.param("http://127.0.0.1:53412/callback?code=x", id="loopback-query"),
        pytest.param("http://127.0.0.1:port/callback", id="loopback-malformed-port"),
        pytest.param("http://[::1/cb", id="broken-ipv6-literal"),
    ],
)
def test_a_near_miss_is_refused_without_redirecting(signed_in, application, redirect_uri):
    response = _authorize(signed_in, client_id=application.client_id, redirect_uri=redirect_uri)

    assert response.status_code == 400
    assert "Location" not in response.headers


def test_localhost_on_any_port_needs_localhost_registered(signed_in):
    application = ApplicationFactory.create(redirect_uris=LOOPBACK_V4)

    response = _authorize(
        signed_in, client_id=application.client_id, redirect_uri="http://localhost:3000/callback"
    )

    assert response.status_code == 400


def test_localhost_is_held_to_its_port_when_localhost_loopback_is_off(settings, application):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "ALLOW_LOCALHOST_LOOPBACK": False}

    assert not redirect_uri_permitted(application=application, redirect_uri="http://localhost:3000/cb")
    assert redirect_uri_permitted(application=application, redirect_uri=LOCALHOST)


def test_another_loopback_address_is_admitted_on_the_port_it_registered_and_no_other():
    application = ApplicationFactory.create(redirect_uris="http://127.0.0.2:5000/cb")

    assert redirect_uri_permitted(application=application, redirect_uri="http://127.0.0.2:5000/cb")
    assert not redirect_uri_permitted(application=application, redirect_uri="http://127.0.0.2:5001/cb")


def test_a_plain_http_redirect_to_another_machine_is_refused_even_when_registered():
    application = ApplicationFactory.create(redirect_uris="http://client.example/callback")

    assert not redirect_uri_permitted(application=application, redirect_uri="http://client.example/callback")


def test_a_global_pattern_admits_another_connector_on_the_origin_the_client_registered(signed_in):
    application = ApplicationFactory.create(
        redirect_uris=CONNECTOR, registration_source=Application.RegistrationSource.DCR
    )
    RedirectUriPatternFactory.create(pattern=CONNECTOR_PATTERN)

    response = _authorize(
        signed_in,
        client_id=application.client_id,
        redirect_uri="https://connectors.example/connector/oauth/second-Connector_2",
    )

    assert response.status_code == 200


@pytest.mark.parametrize(
    "redirect_uri",
    [
        pytest.param("https://connectors.example/connector/oauth/", id="empty-segment"),
        pytest.param("https://connectors.example/connector/oauth/a/b", id="two-segments"),
        pytest.param("https://connectors.example/connector/oauth/a/", id="trailing-slash"),
        pytest.param("https://connectors.example/connector/oauth/..", id="dot-dot"),
        pytest.param("https://connectors.example/connector/oauth/a%2Fb", id="encoded-slash"),
        pytest.param("https://connectors.example/connector/oauth/a;b", id="path-parameter"),
        pytest.param("https://connectors.example/connector/oauth/a?b=c", id="query"),
        pytest.param("https://connectors.example/connector/oauth/a#b", id="fragment"),
        pytest.param("https://x@connectors.example/connector/oauth/a", id="userinfo"),
        pytest.param("https://connectors.example:8443/connector/oauth/a", id="other-port"),
        pytest.param("https://Connectors.example/connector/oauth/a", id="host-case"),
        pytest.param("http://connectors.example/connector/oauth/a", id="plain-http"),
        pytest.param("https://connectors.example/connector/OAUTH/a", id="literal-segment-case"),
    ],
)
def test_a_global_pattern_admits_nothing_beside_its_one_segment(signed_in, redirect_uri):
    application = ApplicationFactory.create(
        redirect_uris=CONNECTOR, registration_source=Application.RegistrationSource.DCR
    )
    RedirectUriPatternFactory.create(pattern=CONNECTOR_PATTERN)

    response = _authorize(signed_in, client_id=application.client_id, redirect_uri=redirect_uri)

    assert response.status_code == 400
    assert "Location" not in response.headers


def test_a_global_pattern_lends_no_origin_to_a_client_that_did_not_register_it():
    application = ApplicationFactory.create(
        redirect_uris=REGISTERED, registration_source=Application.RegistrationSource.DCR
    )
    RedirectUriPatternFactory.create(pattern=CONNECTOR_PATTERN)

    assert not redirect_uri_permitted(
        application=application, redirect_uri="https://connectors.example/connector/oauth/a"
    )


def test_a_pattern_tied_to_a_manual_client_admits_its_callbacks_and_no_other_clients():
    manual = ApplicationFactory.create(redirect_uris=REGISTERED)
    other = ApplicationFactory.create(redirect_uris=REGISTERED)
    RedirectUriPatternFactory.create(pattern=CONNECTOR_PATTERN, application=manual)

    uri = "https://connectors.example/connector/oauth/a"
    assert redirect_uri_permitted(application=manual, redirect_uri=uri)
    assert not redirect_uri_permitted(application=other, redirect_uri=uri)


def test_a_metadata_document_client_gets_no_operator_patterns():
    cimd = ApplicationFactory.create(
        client_id="https://client.example/metadata.json",
        redirect_uris=CONNECTOR,
        registration_source=Application.RegistrationSource.CIMD,
    )
    RedirectUriPatternFactory.create(pattern=CONNECTOR_PATTERN)
    RedirectUriPatternFactory.create(pattern=CONNECTOR_PATTERN, application=cimd)

    assert redirect_uri_permitted(application=cimd, redirect_uri=CONNECTOR)
    assert not redirect_uri_permitted(
        application=cimd, redirect_uri="https://connectors.example/connector/oauth/second"
    )


def test_a_pattern_without_wildcards_is_an_exact_uri():
    pattern = "https://connectors.example/cb"

    assert redirect_pattern_matches(pattern=pattern, uri="https://connectors.example/cb")
    assert not redirect_pattern_matches(pattern=pattern, uri="https://connectors.example/cb/")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("ftp://connectors.example/cb/*", PATTERN_SCHEME),
        ("http://connectors.example/cb/*", PATTERN_SCHEME),
        ("connectors.example/cb/*", PATTERN_SCHEME),
        ("https://*.connectors.example/cb", PATTERN_HOST),
        ("https://user@connectors.example/cb/*", PATTERN_HOST),
        ("https://Connectors.example/cb/*", PATTERN_HOST),
        ("https://connectors.example:99999/cb/*", PATTERN_HOST),
        ("https:///cb/*", PATTERN_HOST),
        ("https://connectors.example/cb/*?x=1", PATTERN_EXTRA),
        ("https://connectors.example/cb/*#x", PATTERN_EXTRA),
        ("https://connectors.example", PATTERN_PATH),
        ("https://connectors.example/cb-*", PATTERN_PATH),
        ("https://connectors.example/**", PATTERN_PATH),
        ("https://connectors.example/cb/../*", PATTERN_PATH),
    ],
)
def test_an_unsafe_pattern_cannot_be_saved(pattern, message):
    with pytest.raises(ValidationError) as refused:
        redirect_pattern_validate(pattern)

    assert refused.value.messages == [message]


@pytest.mark.parametrize(
    "pattern",
    [
        "https://connectors.example/connector/oauth/*",
        "https://connectors.example/a/*/b",
        "http://127.0.0.1/cb/*",
    ],
)
def test_a_plain_pattern_can_be_saved(pattern):
    RedirectUriPatternFactory.create(pattern=pattern).full_clean()

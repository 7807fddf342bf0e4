"""Client ID metadata documents, fetched for real from an HTTPS host on loopback: what makes a
document acceptable, how long it is trusted, and where the server refuses to fetch from."""

from __future__ import annotations

import os
import secrets
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import Application
from oauth2_provider.settings import oauth2_settings

from oauth.cimd import NON_PUBLIC_ADDRESS, metadata_host_resolve
from tests.support.cimd_document_server import Answer, client_document, document_server
from tests.support.factories import RedirectUriPatternFactory
from tests.support.oauth_support import authorize
from tests.support.python_process import python_run

pytestmark = pytest.mark.django_db

REDIRECT_URI = "http://127.0.0.1/callback"


@pytest.fixture
def documents(tmp_path):
    with document_server(tmp_path) as server:
        yield server


@pytest.fixture
def loopback_allowed(settings, documents):
    settings.GATEHOUSE = {
        **settings.GATEHOUSE,
        "CIMD_ALLOW_LOOPBACK": True,
        "CIMD_CA_BUNDLE": str(documents.ca_bundle),
    }


@pytest.fixture
def signed_in(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


def _authorize(browser: Client, *, client_id: str, redirect_uri: str = REDIRECT_URI):
    return authorize(browser, client_id=client_id, redirect_uri=redirect_uri)


def _publish(documents, path: str, **options) -> str:
    client_id = documents.url(path)
    return documents.publish(path, client_document(client_id, redirect_uris=[REDIRECT_URI]), **options)


def _refused(response) -> bool:
    return response.status_code == 400 and "Location" not in response.headers


def test_a_valid_document_registers_its_client_and_reaches_the_consent_page(
    loopback_allowed, documents, signed_in
):
    client_id = _publish(documents, "/client.json", cache_control="max-age=600")

    before = timezone.now()
    response = _authorize(signed_in, client_id=client_id, redirect_uri="http://127.0.0.1:43117/callback")
    after = timezone.now()

    assert response.status_code == 200
    application = Application.objects.get(client_id=client_id)
    assert application.registration_source == Application.RegistrationSource.CIMD
    assert application.client_type == Application.CLIENT_PUBLIC
    assert application.redirect_uris == REDIRECT_URI
    # Fetched during the request: its max-age counts from then.
    max_age = timedelta(seconds=600)
    assert before + max_age <= application.cimd_expires_at <= after + max_age


def test_a_document_whose_client_id_is_another_url_is_refused(loopback_allowed, documents, signed_in):
    client_id = documents.url("/mismatched.json")
    documents.publish(
        "/mismatched.json", client_document(documents.url("/someone-else.json"), redirect_uris=[REDIRECT_URI])
    )

    response = _authorize(signed_in, client_id=client_id)

    assert _refused(response)
    assert documents.requested == ["/mismatched.json"]
    assert not Application.objects.filter(client_id__startswith=documents.url("/")).exists()


def test_a_document_on_a_loopback_address_is_not_fetched_unless_development_allows_it(
    settings, documents, signed_in
):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "CIMD_CA_BUNDLE": str(documents.ca_bundle)}
    client_id = _publish(documents, "/private.json")

    response = _authorize(signed_in, client_id=client_id)

    assert _refused(response)
    assert documents.requested == []
    assert not Application.objects.filter(client_id=client_id).exists()


@pytest.mark.parametrize(
    "address",
    ["10.0.0.7", "192.168.1.20", "172.16.0.1", "169.254.169.254", "100.64.0.1", "fd00::1", "fe80::1",
     "::ffff:10.0.0.7", "64:ff9b::a9fe:a9fe", "0.0.0.0"],  # noqa: S104 (an address refused, not bound)
)  # fmt: skip
def test_private_link_local_and_metadata_addresses_are_refused_even_in_development(loopback_allowed, address):
    with pytest.raises(CIMDError) as refused:
        metadata_host_resolve(hostname=address, port=443)

    assert str(refused.value) == NON_PUBLIC_ADDRESS.format(ip=address)


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_loopback_is_refused_by_default(address):
    with pytest.raises(CIMDError):
        metadata_host_resolve(hostname=address, port=443)


def test_a_certificate_nobody_trusts_is_refused(settings, documents, signed_in):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "CIMD_ALLOW_LOOPBACK": True, "CIMD_CA_BUNDLE": None}
    client_id = _publish(documents, "/untrusted.json")

    response = _authorize(signed_in, client_id=client_id)

    assert _refused(response)
    assert not Application.objects.filter(client_id=client_id).exists()


def test_a_redirect_uri_missing_from_the_document_is_refused_whatever_the_operator_patterns(
    loopback_allowed, documents, signed_in
):
    client_id = _publish(documents, "/client.json")
    RedirectUriPatternFactory.create(pattern="http://127.0.0.1/*")

    response = _authorize(signed_in, client_id=client_id, redirect_uri="http://127.0.0.1:43117/elsewhere")

    assert _refused(response)


def test_a_document_listing_a_plain_http_redirect_to_another_host_is_refused(
    loopback_allowed, documents, signed_in
):
    client_id = documents.url("/plain-http.json")
    documents.publish(
        "/plain-http.json",
        client_document(client_id, redirect_uris=[REDIRECT_URI, "http://client.example/callback"]),
    )

    response = _authorize(signed_in, client_id=client_id)

    assert _refused(response)
    assert not Application.objects.filter(client_id=client_id).exists()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(Answer(body=b"x" * (17 * 1024)), id="too-large"),
        pytest.param(Answer(body=b"{}", headers={"Content-Type": "text/html"}), id="not-json"),
        pytest.param(Answer(body=b"[]"), id="not-an-object"),
        pytest.param(
            Answer(body=b"", status=302, headers={"Location": "https://127.0.0.1/elsewhere.json"}),
            id="redirect",
        ),
        pytest.param(Answer(body=b"{}", status=500), id="server-error"),
    ],
)
def test_an_unusable_answer_is_refused(loopback_allowed, documents, signed_in, answer):
    path = f"/unusable-{answer.status}-{len(answer.body)}.json"
    documents.answers[path] = answer

    response = _authorize(signed_in, client_id=documents.url(path))

    assert _refused(response)
    assert documents.requested == [path]


def test_a_document_marked_no_store_is_fetched_again_after_the_minimum_age(
    loopback_allowed, documents, signed_in
):
    client_id = _publish(documents, "/no-store.json", cache_control="no-store")

    before = timezone.now()
    assert _authorize(signed_in, client_id=client_id).status_code == 200
    after = timezone.now()

    application = Application.objects.get(client_id=client_id)
    min_age = timedelta(seconds=oauth2_settings.CIMD_METADATA_MIN_AGE_SECONDS)
    assert before + min_age <= application.cimd_expires_at <= after + min_age


def test_a_stale_document_is_fetched_again_and_its_changes_apply(loopback_allowed, documents, signed_in):
    client_id = _publish(documents, "/changing.json", cache_control="max-age=3600")
    assert _authorize(signed_in, client_id=client_id).status_code == 200
    assert _authorize(signed_in, client_id=client_id).status_code == 200
    assert documents.requested == ["/changing.json"]

    documents.publish(
        "/changing.json", client_document(client_id, redirect_uris=[REDIRECT_URI], name="Renamed Client")
    )
    Application.objects.filter(client_id=client_id).update(
        cimd_expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert _authorize(signed_in, client_id=client_id).status_code == 200
    assert documents.requested == ["/changing.json", "/changing.json"]
    assert Application.objects.get(client_id=client_id).name == "Renamed Client"


def test_loopback_fetching_cannot_be_turned_on_for_a_public_deployment():
    env = {
        **os.environ,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "PUBLIC_URL": "https://mcp.example.com",
        "CIMD_ALLOW_LOOPBACK": "true",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    result = python_run(["-c", "import django; django.setup()"], env)

    assert result.returncode != 0
    assert "CIMD_ALLOW_LOOPBACK=true needs a loopback PUBLIC_URL" in result.stderr

"""The registration policy where the end-to-end tests cannot reach it cheaply: client ID metadata
documents (fetched for real from an HTTPS host on loopback) meet the same rules as registrations,
and the bounds are the operator's to tune."""

from __future__ import annotations

import pytest
from django.test import Client
from oauth2_provider.models import Application

from oauth.registration_policy import (
    INVALID_CLIENT_METADATA,
    INVALID_REDIRECT_URI,
    ClientMetadataRefused,
    RedirectUriRefused,
    client_metadata_check,
)
from tests.support.cimd_document_server import Answer, client_document, document_server
from tests.support.oauth_support import authorize

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


def _refused(response) -> bool:
    return response.status_code == 400 and "Location" not in response.headers


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"grant_types": ["implicit"]}, id="implicit"),
        pytest.param({"redirect_uris": ["https://user:pass@client.example/cb"]}, id="userinfo"),
        pytest.param({"redirect_uris": [REDIRECT_URI, "http://client.example/callback"]}, id="plain-http"),
        pytest.param({"redirect_uris": [f"https://client.example/cb/{n}" for n in range(11)]}, id="too-many"),
        pytest.param({"client_name": "bad\u0000name"}, id="nul-in-name"),
        pytest.param({"client_name": "n" * 201}, id="long-name"),
    ],
)
def test_a_metadata_document_meets_the_registration_policy(loopback_allowed, documents, signed_in, change):
    path = f"/policy-{next(iter(change))}-{len(documents.answers)}.json"
    client_id = documents.url(path)
    documents.publish(path, {**client_document(client_id, redirect_uris=[REDIRECT_URI]), **change})

    response = authorize(signed_in, client_id=client_id, redirect_uri=REDIRECT_URI)

    assert _refused(response)
    assert documents.requested == [path]
    assert not Application.objects.filter(client_id=client_id).exists()


def test_a_deeply_nested_metadata_document_is_refused_not_a_crash(loopback_allowed, documents, signed_in):
    path = "/deep.json"
    # Within the document size limit, far deeper than any parser should follow.
    documents.answers[path] = Answer(body=b"[" * 8000 + b"]" * 8000)

    response = authorize(signed_in, client_id=documents.url(path), redirect_uri=REDIRECT_URI)

    assert _refused(response)
    assert documents.requested == [path]


def test_a_metadata_document_within_the_policy_still_registers(loopback_allowed, documents, signed_in):
    path = "/fine.json"
    client_id = documents.url(path)
    documents.publish(path, client_document(client_id, redirect_uris=[REDIRECT_URI]))

    response = authorize(signed_in, client_id=client_id, redirect_uri=REDIRECT_URI)

    assert response.status_code == 200
    assert Application.objects.filter(client_id=client_id).exists()


def test_the_bounds_are_read_from_settings(settings):
    uris = [f"https://client.example/cb/{n}" for n in range(3)]
    client_metadata_check({"redirect_uris": uris, "client_name": "abc"})

    settings.GATEHOUSE = {
        **settings.GATEHOUSE,
        "OAUTH_CLIENT_MAX_REDIRECT_URIS": 2,
        "OAUTH_CLIENT_MAX_NAME_LENGTH": 2,
    }

    with pytest.raises(ClientMetadataRefused) as too_many:
        client_metadata_check({"redirect_uris": uris})
    assert too_many.value.oauth_error == INVALID_CLIENT_METADATA
    with pytest.raises(ClientMetadataRefused):
        client_metadata_check({"client_name": "abc"})


def test_a_redirect_uri_refusal_answers_invalid_redirect_uri():
    with pytest.raises(RedirectUriRefused) as refused:
        client_metadata_check({"redirect_uris": ["https://client.example/cb#fragment"]})

    assert refused.value.oauth_error == INVALID_REDIRECT_URI
    assert refused.value.http_status == 400


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param({"client_name": None}, id="null-name"),
        pytest.param({"client_name": ["a"]}, id="list-name"),
        pytest.param({"logo_uri": 5}, id="number-logo"),
        pytest.param({"redirect_uris": "https://client.example/cb"}, id="string-uris"),
        pytest.param({"grant_types": [None]}, id="null-grant"),
        pytest.param({"contacts": [{"a": 1}]}, id="object-contact"),
    ],
)
def test_a_field_of_the_wrong_json_type_is_invalid_metadata(metadata):
    """Found by the fuzz test: ``"client_name": null`` got past DOT to a NOT NULL column (a 500)."""
    with pytest.raises(ClientMetadataRefused) as refused:
        client_metadata_check(metadata)

    assert refused.value.oauth_error == INVALID_CLIENT_METADATA
    assert "must be" in refused.value.message

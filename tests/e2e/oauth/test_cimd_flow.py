"""A client that identifies itself by a client ID metadata document, end to end: the official SDK
client against Daphne, the document on a real HTTPS host on loopback (allowed by the development
switch and trusted through CIMD_CA_BUNDLE on this server only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oauth2_provider.models import Application

from core.models import AuditAction, AuditEvent
from tests.e2e.conftest import _serve
from tests.e2e.harness import REDIRECT_URI, Browser, DaphneServer, Person, sdk_client
from tests.e2e.oauth_driver import OAuthDriver, pkce_pair
from tests.support.cimd_document_server import DocumentServer, client_document, document_server

pytestmark = pytest.mark.django_db

CLIENT_NAME = "Metadata Document e2e client"


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> Iterator[DocumentServer]:
    with document_server(tmp_path_factory.mktemp("cimd")) as server:
        yield server


@pytest.fixture(scope="module")
def cimd_server(demo, database_url, tmp_path_factory, documents) -> Iterator[DaphneServer]:
    yield from _serve(
        tmp_path_factory,
        database_url,
        "cimd",
        CIMD_ALLOW_LOOPBACK="true",
        CIMD_CA_BUNDLE=str(documents.ca_bundle),
    )


def _publish(documents: DocumentServer, path: str, *, claimed_id: str | None = None) -> str:
    client_id = documents.url(path)
    documents.publish(
        path,
        client_document(claimed_id or client_id, redirect_uris=[REDIRECT_URI], name=CLIENT_NAME),
        cache_control="max-age=3600",
    )
    return client_id


async def test_the_sdk_client_with_a_metadata_document_url_completes_the_flow(
    cimd_server, documents, committed
):
    client_id = _publish(documents, "/sdk-client.json")
    alice = Person("alice")

    async with sdk_client(cimd_server, alice, client_metadata_url=client_id) as (client, storage):
        result = await client.call_tool("whoami", {})

    assert result.is_error is False
    assert result.structured_content["user"]["username"] == "alice"
    assert result.structured_content["client"]["name"] == CLIENT_NAME
    assert storage.client_info is not None
    assert storage.client_info.client_id == client_id
    assert storage.tokens is not None
    assert storage.tokens.refresh_token
    assert documents.requested.count("/sdk-client.json") == 1
    application = await Application.objects.aget(client_id=client_id)
    assert application.registration_source == Application.RegistrationSource.CIMD
    assert (
        await AuditEvent.objects.filter(action=AuditAction.CLIENT_REGISTERED, client_id=client_id).acount()
        == 1
    )


async def _authorization_page(server: DaphneServer, client_id: str):
    """What a signed-in person sees on opening an authorization request for this client."""
    _, challenge = pkce_pair()
    driver, browser, alice = OAuthDriver(server), Browser(server.base_url), Person("alice")
    try:
        url = driver.authorize_url(client_id=client_id, challenge=challenge)
        return await browser.open(url, username=alice.username, password=alice.password)
    finally:
        await browser.aclose()
        await driver.aclose()


async def test_a_document_claiming_another_client_id_is_refused(cimd_server, documents, committed):
    client_id = _publish(documents, "/impostor.json", claimed_id=documents.url("/sdk-client.json"))

    response = await _authorization_page(cimd_server, client_id)

    assert response.status_code == 400
    assert "location" not in response.headers
    assert "/impostor.json" in documents.requested
    assert not await Application.objects.filter(client_id=client_id).aexists()


async def test_a_server_without_the_development_switch_never_fetches_from_loopback(
    server, documents, committed
):
    client_id = _publish(documents, "/loopback-only.json")

    response = await _authorization_page(server, client_id)

    assert response.status_code == 400
    assert "location" not in response.headers
    assert "/loopback-only.json" not in documents.requested
    assert not await Application.objects.filter(client_id=client_id).aexists()

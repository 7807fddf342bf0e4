"""The console's upstreams page, for OpenAPI upstreams: a tenant's admin adds one by its document's
URL (fetched from a real local API) or by uploading the document (a multipart form), its base URL
defaulting to the document's server; chooses which operations are served; keeps the stored
document or fetches it again; sends an API key in the query (write-only). Hostile uploads (not
UTF-8, NUL bytes, huge, not OpenAPI) get the form's own message, never a 500, and nothing is saved."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.html import escape

from core.crypto import secret_decrypt
from core.models import AuditAction, AuditEvent
from tests.portal.console_upstreams.support import SECRET, console_form, upstreams_url
from tests.support.openapi_document_server import (
    PETS_DOCUMENT,
    PETS_TOOLS,
    OpenAPIServer,
    pets_document_bytes,
)
from tests.support.upstream_support import upstream_row
from upstreams.forms import OPENAPI_UPLOAD_NOT_OPENAPI
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.openapi.document import EMPTY, MAX_DOCUMENT_BYTES, NOT_OPENAPI, NOT_UTF8, SWAGGER_2, TOO_BIG
from upstreams.openapi.fetch import FETCH_STATUS
from upstreams.openapi.setup import DOCUMENT_REQUIRED
from upstreams.openapi.tools import openapi_tools_generate
from upstreams.validation import (
    OAUTH_CODE_MCP_ONLY,
    QUERY_NAME_INVALID,
    QUERY_OPENAPI_ONLY,
    QUERY_VALUE_NEEDED,
)

pytestmark = pytest.mark.django_db


def _upload(content: bytes, name: str = "pets.json") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/json")


def _openapi_form(**overrides) -> dict:
    return console_form(**{"name": "pets", "transport": "openapi", "url": "", **overrides})


def _stored_pets(tenant, pets_api: OpenAPIServer, **fields) -> Upstream:
    """The pets API as a save by URL leaves it (without the save's fetch and test)."""
    return upstream_row(
        tenant=tenant.slug,
        name="pets",
        **{
            "transport": Transport.OPENAPI,
            "url": pets_api.url("/api"),
            "openapi_url": pets_api.document_url,
            "openapi_document": PETS_DOCUMENT,
            "openapi_tools": openapi_tools_generate(document=PETS_DOCUMENT, selects=lambda name: True).tools,
            "enabled": False,
            **fields,
        },
    )


def test_the_form_is_multipart_and_offers_the_openapi_transport(client, tenant, ada):
    page = client.get(upstreams_url(tenant)).content.decode()

    assert 'enctype="multipart/form-data" id="upstream-form"' in page
    assert '<option value="openapi">' in page
    assert 'type="file" name="openapi_file"' in page


def test_an_admin_adds_an_openapi_upstream_by_its_documents_url(client, tenant, ada, pets_api):
    response = client.post(
        upstreams_url(tenant, "add/"), _openapi_form(openapi_url=pets_api.document_url, enabled="on")
    )

    assert response.status_code == 302, response.content.decode()
    upstream = Upstream.objects.get(tenant=tenant)
    assert upstream.openapi_url == pets_api.document_url
    assert upstream.openapi_document == PETS_DOCUMENT
    assert sorted([tool["name"] for tool in upstream.openapi_tools]) == PETS_TOOLS
    assert sorted(upstream.tool_names) == PETS_TOOLS


def test_the_base_url_defaults_to_the_documents_server(client, tenant, ada, pets_api):
    client.post(upstreams_url(tenant, "add/"), _openapi_form(openapi_url=pets_api.document_url))

    assert Upstream.objects.get(tenant=tenant).url == pets_api.url("/api")


def test_an_admin_adds_an_openapi_upstream_by_uploading_its_document(client, tenant, ada, pets_api):
    response = client.post(
        upstreams_url(tenant, "add/"),
        _openapi_form(url=pets_api.url("/api"), openapi_file=_upload(pets_document_bytes()), enabled="on"),
    )

    assert response.status_code == 302, response.content.decode()
    upstream = Upstream.objects.get(tenant=tenant)
    assert (upstream.openapi_url, upstream.url) == ("", pets_api.url("/api"))
    assert sorted([tool["name"] for tool in upstream.openapi_tools]) == PETS_TOOLS
    page = client.get(response["Location"]).content.decode()
    assert "Document: uploaded" in page


def test_adding_an_openapi_upstream_is_audited(client, tenant, ada, pets_api):
    client.post(
        upstreams_url(tenant, "add/"),
        _openapi_form(url=pets_api.url("/api"), openapi_file=_upload(pets_document_bytes())),
    )

    event = AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED)
    assert (event.user, event.target, event.detail["change"]) == (ada, "pets", "added")
    assert event.detail["transport"] == Transport.OPENAPI


def test_the_change_form_lists_the_operations_served_as_tools(client, tenant, ada, pets_api):
    _stored_pets(tenant, pets_api)

    page = client.get(upstreams_url(tenant, "?change=pets")).content.decode()

    assert '<div id="openapi-operations">' in page
    for name in PETS_TOOLS:
        assert f"<li><code>{name}</code></li>" in page
    assert f'value="{pets_api.document_url}"' in page


def test_an_admin_chooses_the_operations_served(client, tenant, ada, pets_api):
    _stored_pets(tenant, pets_api)

    response = client.post(
        upstreams_url(tenant, "pets/change/"),
        _openapi_form(
            url=pets_api.url("/api"),
            openapi_url=pets_api.document_url,
            include_tools="list_pets",
            enabled="on",
        ),
    )

    assert response.status_code == 302, response.content.decode()
    upstream = Upstream.objects.get(tenant=tenant)
    assert upstream.include_tools == ["list_pets"]
    assert [tool["name"] for tool in upstream.openapi_tools] == ["list_pets"]
    assert upstream.tool_names == ["list_pets"]


def test_a_change_keeps_the_stored_document_unless_asked_to_fetch_it_again(client, tenant, ada, pets_api):
    _stored_pets(tenant, pets_api)
    form = _openapi_form(url=pets_api.url("/api"), openapi_url=pets_api.document_url)
    before = pets_api.requested.count("/openapi.json")

    kept = client.post(upstreams_url(tenant, "pets/change/"), form)
    fetched_after_keep = pets_api.requested.count("/openapi.json")
    refetched = client.post(upstreams_url(tenant, "pets/change/"), {**form, "openapi_refetch": "on"})

    assert (kept.status_code, refetched.status_code) == (302, 302)
    assert fetched_after_keep == before
    assert pets_api.requested.count("/openapi.json") == before + 1


def test_a_document_url_that_answers_an_error_is_refused_beside_it(client, tenant, ada, pets_api):
    response = client.post(
        upstreams_url(tenant, "add/"), _openapi_form(openapi_url=pets_api.url("/missing.json"))
    )

    assert response.status_code == 422
    assert escape(FETCH_STATUS.format(status=404)) in response.content.decode()
    assert not Upstream.objects.exists()


def test_an_openapi_upstream_without_a_document_is_refused(client, tenant, ada):
    response = client.post(upstreams_url(tenant, "add/"), _openapi_form(url="https://api.example/v1"))

    assert response.status_code == 422
    assert escape(DOCUMENT_REQUIRED) in response.content.decode()
    assert not Upstream.objects.exists()


def test_an_upload_with_another_transport_is_refused(client, tenant, ada):
    response = client.post(
        upstreams_url(tenant, "add/"), console_form(openapi_file=_upload(pets_document_bytes()))
    )

    assert response.status_code == 422
    assert escape(OPENAPI_UPLOAD_NOT_OPENAPI) in response.content.decode()
    assert not Upstream.objects.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe{\x00}\x00" + b"\x80" * 64, NOT_UTF8),
        (b'{"openapi": "3.1.0", "info": {"title": "a\\u0000b"}}', "openapi_document: it contains a NUL"),
        (b'{"openapi": "3.1.0",\x00 "paths": {}}', "openapi_document: neither JSON nor YAML"),
        (b" " * (MAX_DOCUMENT_BYTES + 1), TOO_BIG),
        (b'{"hello": "world"}', NOT_OPENAPI),
        (b'{"swagger": "2.0", "info": {"title": "x", "version": "1"}, "paths": {}}', SWAGGER_2),
        (b"[1, 2, 3]", "openapi_document: the document must be an object"),
        (b"   \n", EMPTY),
        (b"", "The submitted file is empty."),
    ],
    ids=[
        "not-utf8",
        "escaped-nul",
        "raw-nul",
        "huge",
        "not-openapi",
        "swagger-2",
        "a-list",
        "blank",
        "empty",
    ],
)
def test_a_hostile_upload_gets_the_forms_own_message_and_nothing_is_saved(
    client, tenant, ada, content, message
):
    response = client.post(
        upstreams_url(tenant, "add/"),
        _openapi_form(url="https://api.example/v1", openapi_file=_upload(content)),
    )

    assert response.status_code == 422
    assert escape(message) in response.content.decode()
    assert not Upstream.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).exists()


def test_a_hostile_upload_to_a_stored_upstream_keeps_its_document(client, tenant, ada, pets_api):
    upstream = _stored_pets(tenant, pets_api)

    response = client.post(
        upstreams_url(tenant, "pets/change/"),
        _openapi_form(url=pets_api.url("/api"), openapi_file=_upload(b'{"hello": "world"}')),
    )

    assert response.status_code == 422
    upstream.refresh_from_db()
    assert (upstream.openapi_url, upstream.openapi_document) == (pets_api.document_url, PETS_DOCUMENT)


def test_an_api_key_in_the_query_is_stored_encrypted_and_never_shown(client, tenant, ada, pets_api):
    response = client.post(
        upstreams_url(tenant, "add/"),
        _openapi_form(
            openapi_url=pets_api.document_url, auth="query", header_name="api_key", header_value=SECRET
        ),
    )

    assert response.status_code == 302, response.content.decode()
    upstream = Upstream.objects.get(tenant=tenant)
    assert (upstream.auth, secret_decrypt(token=upstream.header_value_encrypted)) == (AuthKind.QUERY, SECRET)
    page = client.get(upstreams_url(tenant, "?change=pets")).content.decode()
    assert "api_key query parameter (stored)" in page
    assert SECRET not in page
    assert upstream.header_value_encrypted not in page


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"auth": "oauth_code"}, OAUTH_CODE_MCP_ONLY),
        ({"auth": "query", "header_name": "api_key"}, QUERY_VALUE_NEEDED),
        ({"auth": "query", "header_name": "api key\u202e", "header_value": "k"}, QUERY_NAME_INVALID),
        (
            {
                "transport": "http",
                "url": "https://docs.example/mcp",
                "openapi_file": None,
                "auth": "query",
                "header_name": "k",
                "header_value": "v",
            },
            QUERY_OPENAPI_ONLY,
        ),
    ],
    ids=["sign-in-for-openapi", "query-without-key", "query-bad-name", "query-for-http"],
)
def test_credentials_a_transport_cannot_use_are_refused_beside_the_field(
    client, tenant, ada, pets_api, fields, message
):
    response = client.post(
        upstreams_url(tenant, "add/"),
        _openapi_form(
            **{"url": pets_api.url("/api"), "openapi_file": _upload(pets_document_bytes()), **fields}
        ),
    )

    assert response.status_code == 422
    assert escape(message) in response.content.decode()
    assert not Upstream.objects.exists()


def test_a_refused_form_never_shows_the_secret_typed(client, tenant, ada):
    response = client.post(
        upstreams_url(tenant, "add/"),
        _openapi_form(
            url="https://api.example/v1",
            openapi_file=_upload(b'{"hello": "world"}'),
            auth="query",
            header_name="api_key",
            header_value=SECRET,
        ),
    )

    assert response.status_code == 422
    assert SECRET not in response.content.decode()


def test_testing_an_openapi_upstreams_connection_lists_its_tools(client, tenant, ada, pets_api):
    _stored_pets(tenant, pets_api)

    page = client.post(upstreams_url(tenant, "pets/test/")).content.decode()

    assert '<p role="status" id="test-result">Connected: 3 tools.' in page
    assert "<li><code>list_pets</code></li>" in page


def test_another_tenants_openapi_upstream_is_not_found(client, tenant, ada, outsider_tenant, pets_api):
    theirs = _stored_pets(outsider_tenant, pets_api)

    response = client.post(
        upstreams_url(tenant, "pets/change/"),
        _openapi_form(url=pets_api.url("/api"), openapi_file=_upload(pets_document_bytes(servers=[]))),
    )

    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.openapi_url == pets_api.document_url


def test_a_viewers_upload_is_refused_and_saves_nothing(client, tenant, vic, pets_api):
    response = client.post(
        upstreams_url(tenant, "add/"),
        _openapi_form(url=pets_api.url("/api"), openapi_file=_upload(pets_document_bytes())),
    )

    assert response.status_code == 403
    assert not Upstream.objects.exists()

"""Operators configure OpenAPI upstreams in the admin: by the document's URL (fetched from a real
local API) or an uploaded document (the form is multipart), the tools generated from its operations
shown read-only once saved, an API key in the query write-only, the test action working for them;
a hostile upload is a form error under the upload box, and nothing is saved."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile

from core.crypto import secret_decrypt
from tests.support.admin_support import admin_url, post_action
from tests.support.openapi_document_server import (
    PETS_DOCUMENT,
    PETS_TOOLS,
    OpenAPIServer,
    openapi_server,
    pets_document_bytes,
)
from tests.support.upstream_support import upstream_row
from upstreams.admin import DOCUMENT_FETCHED, DOCUMENT_UPLOADED
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.openapi.document import MAX_DOCUMENT_BYTES, NOT_OPENAPI, NOT_UTF8, TOO_BIG
from upstreams.openapi.tools import openapi_tools_generate

pytestmark = pytest.mark.django_db

API_KEY = "adm-k3y-openapi-90d2"


@pytest.fixture(scope="module")
def pets_api() -> Iterator[OpenAPIServer]:
    with openapi_server() as server:
        yield server


def _form(tenant, **overrides: Any) -> dict[str, Any]:
    data = {
        "tenant": tenant.pk,
        "name": "pets",
        "enabled": "on",
        "transport": "openapi",
        "url": "",
        "openapi_url": "",
        "connect_timeout_seconds": "10",
        "call_timeout_seconds": "60",
        "include_tools": "",
        "exclude_tools": "",
        "scopes": ["mcp:read"],
        "auth": "none",
        "header_name": "",
        "header_value": "",
        "oauth_client_id": "",
        "oauth_client_secret": "",
        "oauth_scope": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def _upload(content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("pets.json", content, content_type="application/json")


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _errors(response) -> dict[str, list[str]]:
    return response.context["adminform"].form.errors


def test_the_add_form_is_multipart_with_an_upload_box(client, operator):
    page = client.get(admin_url(Upstream, "add")).content.decode()

    assert 'enctype="multipart/form-data"' in page
    assert 'type="file" name="openapi_file"' in page


def test_the_names_help_shows_its_placeholders(client, operator):
    # The admin renders help text as HTML: <name>_<tool> would vanish as two unknown tags.
    page = client.get(admin_url(Upstream, "add")).content.decode()

    assert "names become &lt;name&gt;_&lt;tool&gt;." in page


def test_an_operator_adds_an_openapi_upstream_by_its_documents_url(client, operator, tenant, pets_api):
    response = client.post(admin_url(Upstream, "add"), _form(tenant, openapi_url=pets_api.document_url))

    assert response.status_code == 302, _errors(response)
    upstream = Upstream.objects.get()
    assert (upstream.openapi_url, upstream.url) == (pets_api.document_url, pets_api.url("/api"))
    assert sorted(upstream.tool_names) == PETS_TOOLS
    assert "Connected: 3 tools." in _messages(client.get(response["Location"]))


def test_the_generated_tools_are_shown_read_only_after_save(client, operator, tenant, pets_api):
    client.post(admin_url(Upstream, "add"), _form(tenant, openapi_url=pets_api.document_url))
    upstream = Upstream.objects.get()

    page = client.get(admin_url(Upstream, "change", upstream.pk)).content.decode()

    assert '<ul class="openapi-operations">' in page
    for name in PETS_TOOLS:
        assert f"<li><code>{name}</code></li>" in page
    assert 'name="openapi_operations"' not in page
    assert DOCUMENT_FETCHED in page


def test_an_operator_adds_an_openapi_upstream_by_uploading_its_document(client, operator, tenant, pets_api):
    response = client.post(
        admin_url(Upstream, "add"),
        _form(tenant, url=pets_api.url("/api"), openapi_file=_upload(pets_document_bytes())),
    )

    assert response.status_code == 302, _errors(response)
    upstream = Upstream.objects.get()
    assert upstream.openapi_url == ""
    assert sorted([tool["name"] for tool in upstream.openapi_tools]) == PETS_TOOLS
    assert DOCUMENT_UPLOADED in client.get(admin_url(Upstream, "change", upstream.pk)).content.decode()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00\x00not text", NOT_UTF8),
        (b'{"openapi": "3.1.0",\x00 "paths": {}}', "openapi_document: neither JSON nor YAML"),
        (b"{" * 10 + b" " * MAX_DOCUMENT_BYTES, TOO_BIG),
        (b'{"hello": "world"}', NOT_OPENAPI),
    ],
    ids=["not-utf8", "nul", "huge", "not-openapi"],
)
def test_a_hostile_upload_is_a_form_error_under_the_upload_box(client, operator, tenant, content, message):
    response = client.post(
        admin_url(Upstream, "add"), _form(tenant, url="https://api.example/v1", openapi_file=_upload(content))
    )

    assert response.status_code == 200
    assert _errors(response)["openapi_file"][0].startswith(message)
    assert not Upstream.objects.exists()


def test_an_api_key_in_the_query_is_write_only(client, operator, tenant, pets_api):
    response = client.post(
        admin_url(Upstream, "add"),
        _form(
            tenant,
            openapi_url=pets_api.document_url,
            auth="query",
            header_name="api_key",
            header_value=API_KEY,
        ),
    )

    assert response.status_code == 302, _errors(response)
    upstream = Upstream.objects.get()
    assert (upstream.auth, secret_decrypt(token=upstream.header_value_encrypted)) == (AuthKind.QUERY, API_KEY)
    page = client.get(admin_url(Upstream, "change", upstream.pk)).content.decode()
    assert API_KEY not in page
    assert upstream.header_value_encrypted not in page


def test_the_test_action_works_for_an_openapi_upstream(client, operator, tenant, pets_api):
    upstream = upstream_row(
        tenant=tenant.slug,
        name="pets",
        transport=Transport.OPENAPI,
        url=pets_api.url("/api"),
        openapi_url=pets_api.document_url,
        openapi_document=PETS_DOCUMENT,
        openapi_tools=openapi_tools_generate(document=PETS_DOCUMENT, selects=lambda name: True).tools,
    )

    response = post_action(client, Upstream, "test_connection", [upstream])

    assert _messages(response) == ["pets: connected, 3 tools."]

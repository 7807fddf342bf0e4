"""Saving an OpenAPI upstream loads its document (uploaded, or fetched from its URL through the
egress rules), takes the API's base URL from the document's servers when none is given, stores the
tools it generates, and refuses what it cannot serve: no document, no base URL, OAuth without a
token URL or with a secret the token endpoint refuses, a tool name another tool has."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from core.errors import InvalidInput
from core.models import AuditAction, AuditEvent
from tests.support.openapi_api import CLIENT_ID, CLIENT_SECRET, DOCUMENT, OpenApiApi
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.openapi import setup as module
from upstreams.openapi.fetch import FETCH_STATUS
from upstreams.services import upstream_save, upstream_test

pytestmark = pytest.mark.django_db

PETS_TOOLS = ["bigAnswer", "createPet", "listPets", "readNotes", "showPet"]


@pytest.fixture(scope="module")
def api() -> Iterator[OpenApiApi]:
    server = OpenApiApi().start()
    yield server
    server.stop()


def _unsaved(tenant, **fields) -> Upstream:
    return Upstream(tenant=tenant, name="pets", transport=Transport.OPENAPI, **fields)


def _refusal(upstream: Upstream, **kwargs) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        upstream_save(upstream=upstream, allow_stdio=False, **kwargs)
    return refused.value


def test_a_document_fetched_from_its_url_gives_the_base_url_and_the_tools(tenant, api):
    upstream = _unsaved(tenant, openapi_url=api.document_url, prefix_tools=True)
    result = upstream_save(upstream=upstream, allow_stdio=False)
    stored = Upstream.objects.get(pk=upstream.pk)
    assert result is not None
    assert result.ok
    assert result.tool_names == [f"pets_{name}" for name in PETS_TOOLS]
    assert result.summary == "5 tools"
    assert stored.url == f"{api.origin}/v1"
    assert stored.openapi_document == DOCUMENT
    assert sorted(tool["name"] for tool in stored.openapi_tools) == PETS_TOOLS
    assert stored.tool_names == result.tool_names


def test_an_uploaded_document_needs_a_base_url_when_its_servers_are_relative(tenant, api):
    refused = _refusal(_unsaved(tenant), openapi_document=json.dumps(DOCUMENT).encode())
    assert str(refused) == module.BASE_URL_NEEDED
    assert refused.data == {"field": "url"}
    upstream = _unsaved(tenant, url=f"{api.origin}/v1", openapi_url="http://ignored.invalid/doc")
    upstream_save(upstream=upstream, allow_stdio=False, openapi_document=json.dumps(DOCUMENT))
    assert Upstream.objects.get(pk=upstream.pk).openapi_url == ""


def test_the_selection_is_applied_and_a_later_save_keeps_the_stored_document(tenant, api):
    upstream = _unsaved(tenant, openapi_url=api.document_url, include_tools=["listPets"])
    upstream_save(upstream=upstream, allow_stdio=False)
    fetched = len([r for r in api.requests if r["path"] == "/openapi.json"])
    upstream.include_tools = ["listPets", "showPet"]
    result = upstream_save(upstream=upstream, allow_stdio=False)
    assert result is not None
    assert result.tool_names == ["listPets", "showPet"]
    assert len([r for r in api.requests if r["path"] == "/openapi.json"]) == fetched


def test_an_upstream_without_a_document_is_refused(tenant):
    refused = _refusal(_unsaved(tenant, url="http://127.0.0.1:9/v1"))
    assert str(refused) == module.DOCUMENT_REQUIRED
    assert refused.data == {"field": "openapi_document"}


def test_a_document_url_that_answers_an_error_is_refused_naming_the_field(tenant, api):
    refused = _refusal(_unsaved(tenant, openapi_url=f"{api.origin}/missing.json"))
    assert str(refused) == FETCH_STATUS.format(status=404)
    assert refused.data == {"field": "openapi_url"}


def test_a_hostile_upload_is_refused_and_nothing_is_stored(tenant, api):
    refused = _refusal(_unsaved(tenant, url=f"{api.origin}/v1"), openapi_document=b"a: &a [1]\nb: *a\n")
    assert refused.data == {"field": "openapi_document"}
    assert not Upstream.objects.filter(tenant=tenant).exists()


def test_oauth_needs_a_token_url_in_the_document(tenant, api):
    document = json.loads(json.dumps(DOCUMENT))
    del document["components"]["securitySchemes"]
    upstream = _unsaved(tenant, url=f"{api.origin}/v1", auth=AuthKind.OAUTH, oauth_client_id=CLIENT_ID)
    refused = _refusal(upstream, openapi_document=json.dumps(document), oauth_client_secret=CLIENT_SECRET)
    assert str(refused) == module.NO_TOKEN_URL


def test_oauth_client_credentials_are_tried_when_saved(tenant, api):
    upstream = _unsaved(tenant, openapi_url=api.document_url, auth=AuthKind.OAUTH, oauth_client_id=CLIENT_ID)
    refused = _refusal(upstream, oauth_client_secret="wrong")
    assert str(refused) == (
        "Connection test failed: OAuth client credentials failed: the token endpoint answered HTTP 401. "
        "Fix it, or save the upstream disabled to keep it without connecting."
    )
    assert "wrong" not in str(refused)
    upstream = _unsaved(tenant, openapi_url=api.document_url, auth=AuthKind.OAUTH, oauth_client_id=CLIENT_ID)
    result = upstream_save(upstream=upstream, allow_stdio=False, oauth_client_secret=CLIENT_SECRET)
    assert result is not None
    assert result.ok


def test_a_tool_name_gatehouse_has_is_refused_with_the_prefix_that_avoids_it(tenant, api):
    document = json.loads(json.dumps(DOCUMENT))
    document["paths"]["/notes"]["get"]["operationId"] = "whoami"
    upstream = _unsaved(tenant, url=f"{api.origin}/v1")
    refused = _refusal(upstream, openapi_document=json.dumps(document))
    assert refused.data == {"field": "prefix_tools", "colliding": ["whoami"]}
    assert "pets_whoami" in str(refused)


def test_the_configuration_test_counts_the_tools_without_calling_the_api(tenant, api):
    upstream = _unsaved(tenant, openapi_url=api.document_url, enabled=False)
    upstream_save(upstream=upstream, allow_stdio=False)
    calls_before = len(api.requests)
    result = upstream_test(upstream=Upstream.objects.get(pk=upstream.pk))
    assert result.ok
    assert result.tool_count == 5
    assert len(api.requests) == calls_before


def test_the_save_is_audited_with_the_document_named_as_changed(tenant, api):
    upstream = _unsaved(tenant, openapi_url=api.document_url)
    upstream_save(upstream=upstream, allow_stdio=False)
    event = AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).latest("pk")
    assert event.target == "pets"
    assert {"openapi_url", "openapi_document", "url", "transport"} <= set(event.detail["fields"])


def test_a_refetch_asked_for_fetches_the_document_again(tenant, api):
    upstream = _unsaved(tenant, openapi_url=api.document_url)
    upstream_save(upstream=upstream, allow_stdio=False)
    fetched = len([r for r in api.requests if r["path"] == "/openapi.json"])
    upstream_save(upstream=upstream, allow_stdio=False, openapi_refetch=True)
    assert len([r for r in api.requests if r["path"] == "/openapi.json"]) == fetched + 1

"""Each kind of credential belongs to the transports that can use it: an API key in the query to
OpenAPI upstreams only, OAuth sign-in to MCP over HTTP only; the caller's identity headers are not
sent to a REST API; and a document's URL is checked as an upstream's URL is."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from upstreams import validation as module
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.validation import upstream_validate

pytestmark = pytest.mark.django_db


def _refusal(upstream: Upstream, *, header_value: str | None = None) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        upstream_validate(
            upstream=upstream,
            allow_stdio=False,
            header_value=header_value,
            oauth_client_secret=None,
            env=None,
        )
    return refused.value


def _openapi(tenant, **fields) -> Upstream:
    return Upstream(tenant=tenant, name="pets", transport=Transport.OPENAPI, **fields)


def test_an_api_key_in_the_query_is_refused_for_an_mcp_upstream(tenant):
    upstream = Upstream(
        tenant=tenant, name="mcp", url="http://127.0.0.1:9/mcp", auth=AuthKind.QUERY, header_name="k"
    )
    assert str(_refusal(upstream, header_value="v")) == module.QUERY_OPENAPI_ONLY


def test_an_api_key_in_the_query_needs_a_parameter_name_and_a_value(tenant):
    assert str(_refusal(_openapi(tenant, auth=AuthKind.QUERY, header_name="a b"), header_value="v")) == (
        module.QUERY_NAME_INVALID
    )
    assert (
        str(_refusal(_openapi(tenant, auth=AuthKind.QUERY, header_name="api_key")))
        == module.QUERY_VALUE_NEEDED
    )


def test_oauth_sign_in_is_refused_for_an_openapi_upstream(tenant):
    assert str(_refusal(_openapi(tenant, auth=AuthKind.OAUTH_CODE))) == module.OAUTH_CODE_MCP_ONLY


def test_oauth_sign_in_needs_no_client_and_no_secret_for_an_mcp_upstream(tenant):
    upstream = Upstream(tenant=tenant, name="mcp", url="http://127.0.0.1:9/mcp", auth=AuthKind.OAUTH_CODE)
    upstream_validate(
        upstream=upstream, allow_stdio=False, header_value=None, oauth_client_secret=None, env=None
    )


def test_identity_headers_are_refused_for_an_openapi_upstream(tenant):
    assert str(_refusal(_openapi(tenant, pass_identity=True))) == module.PASS_IDENTITY_MCP_ONLY


def test_a_document_url_on_a_private_address_is_refused_unless_allowed(tenant, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "UPSTREAM_PRIVATE_NETWORKS": []}
    refused = _refusal(_openapi(tenant, openapi_url="http://169.254.169.254/openapi.json"))
    assert refused.data == {"field": "openapi_url"}
    assert "169.254.169.254 is a private address" in str(refused)


def test_an_openapi_upstream_may_leave_its_base_url_to_the_document(tenant):
    upstream_validate(
        upstream=_openapi(tenant, openapi_url="http://127.0.0.1:9/openapi.json"),
        allow_stdio=False,
        header_value=None,
        oauth_client_secret=None,
        env=None,
    )


def test_a_base_url_with_a_query_is_refused(tenant):
    refused = _refusal(_openapi(tenant, url="http://127.0.0.1:9/v1?api_key=x"))
    assert str(refused) == module.BASE_URL_QUERY
    assert refused.data == {"field": "url"}

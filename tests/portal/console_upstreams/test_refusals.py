"""What the console's upstreams page refuses, in its own words and never with a 500: a post without
the CSRF token, another tenant's upstream (not found, as a missing one), hostile text in any box
(bidi and zero-width characters, huge values, private addresses, unknown choices), a NUL or invalid
UTF-8 anywhere in a form or the query."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils.html import escape

from oauth.parameter_guard import PARAMETER_HAS_NUL
from tests.portal.console_upstreams.support import console_form, upstreams_url
from tests.support.upstream_support import upstream_row
from upstreams.models import Upstream
from upstreams.selectors import NO_UPSTREAM
from upstreams.validation import NAME_INVALID

pytestmark = pytest.mark.django_db


def test_a_post_without_the_csrf_token_is_refused(tenant, ada):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)

    response = strict.post(upstreams_url(tenant, "add/"), console_form())

    assert response.status_code == 403
    assert not Upstream.objects.exists()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "?change=theirs"),
        ("post", "theirs/change/"),
        ("post", "theirs/test/"),
        ("post", "theirs/remove/"),
        ("post", "no-such/remove/"),
    ],
)
def test_another_tenants_upstream_is_not_found(client, tenant, ada, outsider_tenant, method, path):
    upstream_row(tenant=outsider_tenant.slug, name="theirs", url="https://theirs.example/mcp")

    response = getattr(client, method)(
        upstreams_url(tenant, path), console_form(name="theirs") if method == "post" else None
    )

    assert response.status_code == 404
    assert escape(
        NO_UPSTREAM.format(name=path.split("/")[0].removeprefix("?change="), tenant=tenant.slug)
    ) in (response.content.decode())
    assert Upstream.objects.get(name="theirs").url == "https://theirs.example/mcp"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "do\u202ecs"}, NAME_INVALID),
        ({"name": "do\u200bcs"}, NAME_INVALID),
        ({"name": "Docs"}, NAME_INVALID),
        ({"name": "x" * 5000}, "name: at most 40 characters."),
        ({"url": "https://docs.example/" + "x" * 5000}, "url: at most 2000 characters."),
        ({"url": "x" * 30_000}, "Ensure this value has at most 20000 characters"),
        ({"url": "ftp://docs.example/mcp"}, "url: an http:// or https:// URL with a host is needed."),
        ({"url": "javascript:alert(1)"}, "url: an http:// or https:// URL with a host is needed."),
        ({"url": "https://user:pw@docs.example/mcp"}, "url: must not carry credentials"),
        ({"url": "https://docs.example/m\tcp"}, "url: must not contain control characters"),
        ({"url": "http://[::1/mcp"}, "url: not a valid URL"),
        # Not public, and not in the networks the test settings allow (loopback): refused at the field.
        (
            {"url": "http://169.254.169.254/latest/meta-data/"},
            "url: 169.254.169.254 is a private address; an operator allows private networks with "
            "UPSTREAM_PRIVATE_NETWORKS.",
        ),
        ({"transport": "carrier-pigeon"}, "Select a valid choice."),
        ({"auth": "magic"}, "Select a valid choice."),
        ({"scopes": ["mcp:everything"]}, "Select a valid choice."),
        ({"scopes": []}, "This field is required."),
        (
            {"auth": "header", "header_name": "Host", "header_value": "x"},
            "header_name: Host is set by Gatehouse itself.",
        ),
        ({"auth": "header", "header_name": "X-Key\u202e", "header_value": "x"}, "header_name: a header name"),
        ({"auth": "oauth", "oauth_client_secret": "s"}, "oauth_client_id: the OAuth client id is needed."),
    ],
)
def test_hostile_input_gets_the_forms_own_message(client, tenant, ada, fields, message):
    response = client.post(upstreams_url(tenant, "add/"), console_form(**fields))

    assert response.status_code == 422
    assert escape(message) in response.content.decode()
    assert not Upstream.objects.exists()


def test_a_header_value_with_a_line_break_is_refused_and_never_echoed(client, tenant, ada):
    value = "Bearer abc\r\nX-Injected: 1"

    response = client.post(
        upstreams_url(tenant, "add/"),
        console_form(auth="header", header_name="Authorization", header_value=value),
    )

    assert response.status_code == 422
    assert "header_value: must not contain control characters" in response.content.decode()
    assert "X-Injected" not in response.content.decode()


@pytest.mark.parametrize("path", ["add/", "docs/change/", "docs/test/", "docs/remove/"])
@pytest.mark.parametrize(
    "body", [b"name=do%00cs&url=https%3A%2F%2Fdocs.example%2Fmcp", b"name=%FF&transport=http"]
)
def test_a_nul_or_invalid_utf8_in_a_form_is_refused_with_the_reason(client, tenant, ada, path, body):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp")

    response = client.post(
        upstreams_url(tenant, path), body, content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()
    assert list(Upstream.objects.values_list("name", "url")) == [("docs", "https://docs.example/mcp")]


def test_a_nul_in_the_query_is_refused_with_the_reason(client, tenant, ada):
    response = client.get(upstreams_url(tenant, "?change=do%00cs"))

    assert response.status_code == 400
    assert escape(PARAMETER_HAS_NUL.format(name=repr("change"))) in response.content.decode()

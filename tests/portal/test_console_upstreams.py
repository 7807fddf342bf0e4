"""The console's upstreams page: a tenant's admin adds an upstream MCP server (Streamable HTTP or SSE,
tested on save), changes it (credentials write-only: blank keeps the stored ones), tests its
connection (its tools and what is left out, nothing written) and removes it, each change audited
without a secret; stdio stays the operators'; a viewer sees no forms and cannot post; hostile input
gets the form's own message; another tenant's upstream is never found."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils.html import escape

from core.crypto import secret_decrypt, secret_encrypt
from core.models import AuditAction, AuditEvent
from mcp_gateway.kernel.federated_names import confusable_reason
from oauth.parameter_guard import PARAMETER_HAS_NUL
from portal.console.upstream_forms import CREDENTIALS_BOTH
from portal.console.upstreams import OPERATORS_ONLY, REMOVED, SAVED_DISABLED
from tests.e2e.harness import free_port
from tests.support.factories import TenantFactory
from tests.support.upstream_support import UpstreamProcess, stdio_command, upstream_row
from upstreams import selectors
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.selectors import NO_UPSTREAM
from upstreams.validation import NAME_INVALID, STDIO_OPERATORS_ONLY

pytestmark = pytest.mark.django_db

SECRET = "Bearer upstream-s3cr3t-4f1e"
# A tool the test server publishes besides its own, confusable with Gatehouse's ``whoami``: left out.
CONFUSABLE = "wh0ami"


@pytest.fixture(scope="module")
def http_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamProcess]:
    workdir = Path(tmp_path_factory.mktemp("console-upstreams"))
    process = UpstreamProcess("http", workdir=workdir, options=("--extra-tool", CONFUSABLE)).start()
    yield process
    process.kill()


@pytest.fixture
def outsider_tenant():
    return TenantFactory.create(slug="other-tenant", name="Other")


def _url(tenant, action: str = "") -> str:
    return f"/console/{tenant.slug}/upstreams/{action}"


def _post(**overrides: Any) -> dict[str, Any]:
    data = {
        "name": "docs",
        "transport": "http",
        "url": "https://docs.example/mcp",
        "auth": "none",
        "header_name": "",
        "header_value": "",
        "oauth_client_id": "",
        "oauth_client_secret": "",
        "oauth_scope": "",
        "include_tools": "",
        "exclude_tools": "",
        "scopes": ["mcp:read"],
        **overrides,
    }
    return {key: value for key, value in data.items() if value is not None}


def _messages(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _stored_header(tenant, **fields: Any) -> Upstream:
    return upstream_row(
        tenant=tenant.slug,
        name="docs",
        **{
            "url": "https://docs.example/mcp",
            "enabled": False,
            "auth": AuthKind.HEADER,
            "header_name": "Authorization",
            "header_value_encrypted": secret_encrypt(plaintext=SECRET),
            **fields,
        },
    )


def test_the_page_lists_the_tenants_upstreams_with_their_tools_and_never_a_credential(
    client, tenant, ada, outsider_tenant
):
    upstream = _stored_header(tenant, url="https://docs.example/mcp?key=in-the-url", tool_names=["search"])
    upstream_row(tenant=outsider_tenant.slug, name="elsewhere", url="https://elsewhere.example/mcp")

    page = client.get(_url(tenant)).content.decode()

    assert '<th scope="row" class="wrap"><code>docs</code></th>' in page
    assert "<code>https://docs.example/mcp?…</code>" in page
    assert "<li><code>search</code></li>" in page
    assert "Authorization header (stored)" in page
    assert "elsewhere" not in page
    assert SECRET not in page
    assert upstream.header_value_encrypted not in page
    assert "in-the-url" not in page


def test_an_admin_adds_an_upstream_which_is_tested_and_its_tools_listed(client, tenant, ada, http_upstream):
    response = client.post(_url(tenant, "add/"), _post(url=http_upstream.url, enabled="on"))

    assert response.status_code == 302, response.content.decode()
    upstream = Upstream.objects.get(tenant=tenant)
    assert "echo" in upstream.tool_names
    assert upstream.last_tested is not None
    page = client.get(response["Location"]).content.decode()
    assert "<li><code>echo</code></li>" in page
    assert f"docs is saved: connected, {len(upstream.tool_names)} tools" in page


def test_what_a_save_leaves_out_is_said_with_the_reason(client, tenant, ada, http_upstream):
    response = client.post(_url(tenant, "add/"), _post(url=http_upstream.url, enabled="on"))

    reason = confusable_reason("whoami", whose="one of Gatehouse's own")
    assert f"docs: Left out {CONFUSABLE!r}: {reason}." in _messages(response)
    assert CONFUSABLE not in Upstream.objects.get(tenant=tenant).tool_names


def test_adding_an_upstream_is_audited_with_the_fields_set_and_no_secret(client, tenant, ada):
    client.post(
        _url(tenant, "add/"),
        _post(auth="header", header_name="Authorization", header_value=SECRET),
    )

    event = AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED)
    assert (event.user, event.tenant, event.target, event.detail["change"]) == (ada, tenant, "docs", "added")
    assert {"name", "url", "auth", "header_name", "header_value"} <= set(event.detail["fields"])
    assert event.detail["header_value"] == "replaced"
    assert SECRET not in str(event.detail)
    assert "upstream-s3cr3t" not in str(event.detail)


def test_a_disabled_upstream_is_saved_without_connecting(client, tenant, ada):
    url = f"http://127.0.0.1:{free_port()}/mcp"

    response = client.post(_url(tenant, "add/"), _post(url=url))

    assert SAVED_DISABLED.format(name="docs") in _messages(response)
    assert Upstream.objects.get(tenant=tenant).last_tested is None


def test_an_enabled_upstream_that_is_down_is_refused_with_the_reason(client, tenant, ada):
    url = f"http://127.0.0.1:{free_port()}/mcp"

    response = client.post(_url(tenant, "add/"), _post(url=url, enabled="on"))

    assert response.status_code == 422
    assert f"could not connect to {url}: connection refused" in response.content.decode()
    assert not Upstream.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).exists()


def test_a_header_value_is_stored_encrypted_and_never_shown(client, tenant, ada):
    client.post(_url(tenant, "add/"), _post(auth="header", header_name="Authorization", header_value=SECRET))

    upstream = Upstream.objects.get(tenant=tenant)
    assert secret_decrypt(token=upstream.header_value_encrypted) == SECRET
    change_page = client.get(_url(tenant, "?change=docs")).content.decode()
    assert 'value="Authorization"' in change_page
    assert SECRET not in change_page
    assert upstream.header_value_encrypted not in change_page


def test_a_blank_header_value_keeps_the_stored_one_on_change(client, tenant, ada):
    upstream = _stored_header(tenant)
    stored = upstream.header_value_encrypted

    response = client.post(
        _url(tenant, "docs/change/"),
        _post(auth="header", header_name="Authorization", exclude_tools="fail"),
    )

    assert response.status_code == 302, response.content.decode()
    upstream.refresh_from_db()
    assert (upstream.exclude_tools, upstream.header_value_encrypted) == (["fail"], stored)
    event = AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED)
    assert (event.detail["change"], event.detail["fields"]) == ("changed", ["exclude_tools"])


def test_removing_the_stored_credentials_drops_them(client, tenant, ada):
    upstream = _stored_header(tenant)

    client.post(_url(tenant, "docs/change/"), _post(remove_credentials="on"))

    upstream.refresh_from_db()
    assert (upstream.auth, upstream.header_value_encrypted) == (AuthKind.NONE, "")
    assert AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED).detail["header_value"] == "removed"


def test_a_new_credential_and_removing_the_stored_ones_together_is_refused(client, tenant, ada):
    upstream = _stored_header(tenant)

    response = client.post(
        _url(tenant, "docs/change/"),
        _post(auth="header", header_name="Authorization", header_value="Bearer new", remove_credentials="on"),
    )

    assert response.status_code == 422
    assert CREDENTIALS_BOTH in response.content.decode()
    assert "Bearer new" not in response.content.decode()
    assert Upstream.objects.get(pk=upstream.pk).header_value_encrypted == upstream.header_value_encrypted


def test_a_refused_change_shows_the_form_for_the_stored_upstream_again(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp", enabled=False)

    response = client.post(_url(tenant, "docs/change/"), _post(name="Not A Slug"))

    assert response.status_code == 422
    assert f'action="{_url(tenant, "docs/change/")}"' in response.content.decode()
    assert Upstream.objects.get(tenant=tenant).name == "docs"


def test_a_header_credential_without_a_value_is_refused_beside_the_field(client, tenant, ada):
    response = client.post(_url(tenant, "add/"), _post(auth="header", header_name="Authorization"))

    assert response.status_code == 422
    assert "header_value: the header&#x27;s value is needed." in response.content.decode()
    assert not Upstream.objects.exists()


def test_testing_the_connection_shows_its_tools_and_what_is_left_out_and_writes_nothing(
    client, tenant, ada, http_upstream
):
    upstream = upstream_row(tenant=tenant.slug, name="docs", url=http_upstream.url, enabled=False)

    response = client.post(_url(tenant, "docs/test/"))

    page = response.content.decode()
    assert response.status_code == 200
    assert '<p role="status" id="test-result">Connected: ' in page
    assert "<li><code>echo</code></li>" in page
    assert escape(f"Left out {CONFUSABLE!r}: ") in page
    upstream.refresh_from_db()
    assert (upstream.last_tested, upstream.tool_names) == (None, [])
    assert not AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).exists()


def test_a_failed_connection_test_says_why(client, tenant, ada):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    upstream_row(tenant=tenant.slug, name="docs", url=url, enabled=False)

    page = client.post(_url(tenant, "docs/test/")).content.decode()

    assert f"Could not connect: could not connect to {url}: connection refused" in page


def test_a_connection_test_to_a_private_address_says_how_an_operator_allows_it(client, tenant, ada, settings):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    upstream_row(tenant=tenant.slug, name="docs", url=url, enabled=False)
    settings.GATEHOUSE = {**settings.GATEHOUSE, "UPSTREAM_PRIVATE_NETWORKS": []}

    page = client.post(_url(tenant, "docs/test/")).content.decode()

    assert (
        f"Could not connect: could not connect to {url}: 127.0.0.1 is a private address; an operator "
        "allows private networks with UPSTREAM_PRIVATE_NETWORKS"
    ) in page


def test_an_admin_removes_an_upstream_audited_and_its_cached_configuration_dropped(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp")
    selectors._cache[tenant.pk] = (time.monotonic() + 3600, ())

    response = client.post(_url(tenant, "docs/remove/"))

    assert response.status_code == 302
    assert REMOVED.format(name="docs") in _messages(response)
    assert not Upstream.objects.exists()
    assert tenant.pk not in selectors._cache
    event = AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED)
    assert (event.user, event.target, event.detail["change"]) == (ada, "docs", "removed")


def test_stdio_is_refused_even_when_posted(client, tenant, ada):
    command, _ = stdio_command()

    response = client.post(_url(tenant, "add/"), _post(transport="stdio", url="", command=command))

    assert response.status_code == 422
    assert escape(STDIO_OPERATORS_ONLY) in response.content.decode()
    assert not Upstream.objects.exists()


def test_an_operators_stdio_upstream_is_listed_but_never_changed_tested_or_removed(client, tenant, ada):
    command, args = stdio_command()
    upstream_row(tenant=tenant.slug, name="local", transport=Transport.STDIO, command=command, args=args)

    page = client.get(_url(tenant)).content.decode()
    statuses = [
        client.post(_url(tenant, f"local/{action}/"), _post(name="local")).status_code
        for action in ("change", "test", "remove")
    ]

    assert "<code>local</code>" in page
    assert "Operators only" in page
    assert statuses == [403, 403, 403]
    assert Upstream.objects.get(name="local").transport == Transport.STDIO
    assert (
        escape(OPERATORS_ONLY.format(name="local"))
        in client.get(_url(tenant, "?change=local")).content.decode()
    )


def test_a_viewer_sees_no_forms_and_their_posts_change_nothing(client, tenant, vic):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp", tool_names=["search"])

    page = client.get(_url(tenant)).content.decode()
    posts = [("add/", _post(name="sneaky")), ("docs/change/", _post(url="https://evil.example/mcp"))]
    posts += [("docs/test/", {}), ("docs/remove/", {})]
    statuses = [client.post(_url(tenant, path), data).status_code for path, data in posts]

    assert "<li><code>search</code></li>" in page
    assert f'action="/console/{tenant.slug}/' not in page
    assert "Only the tenant&#x27;s admins change this" in page
    assert statuses == [403, 403, 403, 403]
    assert list(Upstream.objects.values_list("name", "url")) == [("docs", "https://docs.example/mcp")]
    assert not AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).exists()


def test_a_post_without_the_csrf_token_is_refused(tenant, ada):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)

    response = strict.post(_url(tenant, "add/"), _post())

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

    response = getattr(client, method)(_url(tenant, path), _post(name="theirs") if method == "post" else None)

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
    response = client.post(_url(tenant, "add/"), _post(**fields))

    assert response.status_code == 422
    assert escape(message) in response.content.decode()
    assert not Upstream.objects.exists()


def test_a_header_value_with_a_line_break_is_refused_and_never_echoed(client, tenant, ada):
    value = "Bearer abc\r\nX-Injected: 1"

    response = client.post(
        _url(tenant, "add/"), _post(auth="header", header_name="Authorization", header_value=value)
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

    response = client.post(_url(tenant, path), body, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()
    assert list(Upstream.objects.values_list("name", "url")) == [("docs", "https://docs.example/mcp")]


def test_a_nul_in_the_query_is_refused_with_the_reason(client, tenant, ada):
    response = client.get(_url(tenant, "?change=do%00cs"))

    assert response.status_code == 400
    assert escape(PARAMETER_HAS_NUL.format(name=repr("change"))) in response.content.decode()


def test_the_page_answers_a_get_and_the_changes_only_a_post(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp")

    statuses = [client.post(_url(tenant)).status_code]
    statuses += [
        client.get(_url(tenant, path)).status_code for path in ("add/", "docs/test/", "docs/remove/")
    ]

    assert statuses == [405, 405, 405, 405]


def test_the_tools_page_links_to_the_upstreams_page(client, tenant, ada):
    page = client.get(f"/console/{tenant.slug}/tools/").content.decode()

    assert f'href="/console/{tenant.slug}/upstreams/" id="upstreams-link"' in page


def test_the_page_costs_a_bounded_number_of_queries(client, tenant, ada, django_assert_max_num_queries):
    for number in range(8):
        upstream_row(
            tenant=tenant.slug,
            name=f"server-{number}",
            url=f"https://s{number}.example/mcp",
            tool_names=[f"tool-{n}" for n in range(5)],
        )

    with django_assert_max_num_queries(8):
        response = client.get(_url(tenant))

    assert response.status_code == 200

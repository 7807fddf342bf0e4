"""The console's upstreams page, for upstream MCP servers: a tenant's admin adds one (Streamable HTTP
or SSE, tested on save), changes it (credentials write-only: blank keeps the stored ones), tests its
connection (its tools and what is left out, nothing written) and removes it, each change audited
without a secret; stdio stays the operators'; a viewer sees no forms and cannot post."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils.html import escape

from core.crypto import secret_decrypt
from core.models import AuditAction, AuditEvent
from mcp_gateway.kernel.federated_names import confusable_reason
from portal.console.upstream_forms import CREDENTIALS_BOTH
from portal.console.upstreams import OPERATORS_ONLY, REMOVED, SAVED_DISABLED
from tests.e2e.harness import free_port
from tests.portal.console_upstreams.support import (
    SECRET,
    console_form,
    messages_of,
    stored_header,
    upstreams_url,
)
from tests.support.upstream_support import UpstreamProcess, stdio_command, upstream_row
from upstreams import selectors
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.validation import STDIO_OPERATORS_ONLY

pytestmark = pytest.mark.django_db

# A tool the test server publishes besides its own, confusable with Gatehouse's ``whoami``: left out.
CONFUSABLE = "wh0ami"


@pytest.fixture(scope="module")
def http_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamProcess]:
    workdir = Path(tmp_path_factory.mktemp("console-upstreams"))
    process = UpstreamProcess("http", workdir=workdir, options=("--extra-tool", CONFUSABLE)).start()
    yield process
    process.kill()


def test_the_page_lists_the_tenants_upstreams_with_their_tools_and_never_a_credential(
    client, tenant, ada, outsider_tenant
):
    upstream = stored_header(tenant, url="https://docs.example/mcp?key=in-the-url", tool_names=["search"])
    upstream_row(tenant=outsider_tenant.slug, name="elsewhere", url="https://elsewhere.example/mcp")

    page = client.get(upstreams_url(tenant)).content.decode()

    assert '<th scope="row" class="wrap"><code>docs</code></th>' in page
    assert "<code>https://docs.example/mcp?…</code>" in page
    assert "<li><code>search</code></li>" in page
    assert "Authorization header (stored)" in page
    assert "elsewhere" not in page
    assert SECRET not in page
    assert upstream.header_value_encrypted not in page
    assert "in-the-url" not in page


def test_an_admin_adds_an_upstream_which_is_tested_and_its_tools_listed(client, tenant, ada, http_upstream):
    response = client.post(upstreams_url(tenant, "add/"), console_form(url=http_upstream.url, enabled="on"))

    assert response.status_code == 302, response.content.decode()
    upstream = Upstream.objects.get(tenant=tenant)
    assert "echo" in upstream.tool_names
    assert upstream.last_tested is not None
    page = client.get(response["Location"]).content.decode()
    assert "<li><code>echo</code></li>" in page
    assert f"docs is saved: connected, {len(upstream.tool_names)} tools" in page


def test_what_a_save_leaves_out_is_said_with_the_reason(client, tenant, ada, http_upstream):
    response = client.post(upstreams_url(tenant, "add/"), console_form(url=http_upstream.url, enabled="on"))

    reason = confusable_reason("whoami", whose="one of Gatehouse's own")
    assert f"docs: Left out {CONFUSABLE!r}: {reason}." in messages_of(response)
    assert CONFUSABLE not in Upstream.objects.get(tenant=tenant).tool_names


def test_adding_an_upstream_is_audited_with_the_fields_set_and_no_secret(client, tenant, ada):
    client.post(
        upstreams_url(tenant, "add/"),
        console_form(auth="header", header_name="Authorization", header_value=SECRET),
    )

    event = AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED)
    assert (event.user, event.tenant, event.target, event.detail["change"]) == (ada, tenant, "docs", "added")
    assert {"name", "url", "auth", "header_name", "header_value"} <= set(event.detail["fields"])
    assert event.detail["header_value"] == "replaced"
    assert SECRET not in str(event.detail)
    assert "upstream-s3cr3t" not in str(event.detail)


def test_a_disabled_upstream_is_saved_without_connecting(client, tenant, ada):
    url = f"http://127.0.0.1:{free_port()}/mcp"

    response = client.post(upstreams_url(tenant, "add/"), console_form(url=url))

    assert SAVED_DISABLED.format(name="docs") in messages_of(response)
    assert Upstream.objects.get(tenant=tenant).last_tested is None


def test_an_enabled_upstream_that_is_down_is_refused_with_the_reason(client, tenant, ada):
    url = f"http://127.0.0.1:{free_port()}/mcp"

    response = client.post(upstreams_url(tenant, "add/"), console_form(url=url, enabled="on"))

    assert response.status_code == 422
    assert f"could not connect to {url}: connection refused" in response.content.decode()
    assert not Upstream.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).exists()


def test_a_header_value_is_stored_encrypted_and_never_shown(client, tenant, ada):
    client.post(
        upstreams_url(tenant, "add/"),
        console_form(auth="header", header_name="Authorization", header_value=SECRET),
    )

    upstream = Upstream.objects.get(tenant=tenant)
    assert secret_decrypt(token=upstream.header_value_encrypted) == SECRET
    change_page = client.get(upstreams_url(tenant, "?change=docs")).content.decode()
    assert 'value="Authorization"' in change_page
    assert SECRET not in change_page
    assert upstream.header_value_encrypted not in change_page


def test_a_blank_header_value_keeps_the_stored_one_on_change(client, tenant, ada):
    upstream = stored_header(tenant)
    stored = upstream.header_value_encrypted

    response = client.post(
        upstreams_url(tenant, "docs/change/"),
        console_form(auth="header", header_name="Authorization", exclude_tools="fail"),
    )

    assert response.status_code == 302, response.content.decode()
    upstream.refresh_from_db()
    assert (upstream.exclude_tools, upstream.header_value_encrypted) == (["fail"], stored)
    event = AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED)
    assert (event.detail["change"], event.detail["fields"]) == ("changed", ["exclude_tools"])


def test_removing_the_stored_credentials_drops_them(client, tenant, ada):
    upstream = stored_header(tenant)

    client.post(upstreams_url(tenant, "docs/change/"), console_form(remove_credentials="on"))

    upstream.refresh_from_db()
    assert (upstream.auth, upstream.header_value_encrypted) == (AuthKind.NONE, "")
    assert AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED).detail["header_value"] == "removed"


def test_a_new_credential_and_removing_the_stored_ones_together_is_refused(client, tenant, ada):
    upstream = stored_header(tenant)

    response = client.post(
        upstreams_url(tenant, "docs/change/"),
        console_form(
            auth="header", header_name="Authorization", header_value="Bearer new", remove_credentials="on"
        ),
    )

    assert response.status_code == 422
    assert CREDENTIALS_BOTH in response.content.decode()
    assert "Bearer new" not in response.content.decode()
    assert Upstream.objects.get(pk=upstream.pk).header_value_encrypted == upstream.header_value_encrypted


def test_a_refused_change_shows_the_form_for_the_stored_upstream_again(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp", enabled=False)

    response = client.post(upstreams_url(tenant, "docs/change/"), console_form(name="Not A Slug"))

    assert response.status_code == 422
    assert f'action="{upstreams_url(tenant, "docs/change/")}"' in response.content.decode()
    assert Upstream.objects.get(tenant=tenant).name == "docs"


def test_a_header_credential_without_a_value_is_refused_beside_the_field(client, tenant, ada):
    response = client.post(
        upstreams_url(tenant, "add/"), console_form(auth="header", header_name="Authorization")
    )

    assert response.status_code == 422
    assert "header_value: the header&#x27;s value is needed." in response.content.decode()
    assert not Upstream.objects.exists()


def test_testing_the_connection_shows_its_tools_and_what_is_left_out_and_writes_nothing(
    client, tenant, ada, http_upstream
):
    upstream = upstream_row(tenant=tenant.slug, name="docs", url=http_upstream.url, enabled=False)

    response = client.post(upstreams_url(tenant, "docs/test/"))

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

    page = client.post(upstreams_url(tenant, "docs/test/")).content.decode()

    assert f"Could not connect: could not connect to {url}: connection refused" in page


def test_a_connection_test_to_a_private_address_says_how_an_operator_allows_it(client, tenant, ada, settings):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    upstream_row(tenant=tenant.slug, name="docs", url=url, enabled=False)
    settings.GATEHOUSE = {**settings.GATEHOUSE, "UPSTREAM_PRIVATE_NETWORKS": []}

    page = client.post(upstreams_url(tenant, "docs/test/")).content.decode()

    assert (
        f"Could not connect: could not connect to {url}: 127.0.0.1 is a private address; an operator "
        "allows private networks with UPSTREAM_PRIVATE_NETWORKS"
    ) in page


def test_an_admin_removes_an_upstream_audited_and_its_cached_configuration_dropped(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp")
    selectors._cache[tenant.pk] = (time.monotonic() + 3600, ())

    response = client.post(upstreams_url(tenant, "docs/remove/"))

    assert response.status_code == 302
    assert REMOVED.format(name="docs") in messages_of(response)
    assert not Upstream.objects.exists()
    assert tenant.pk not in selectors._cache
    event = AuditEvent.objects.get(action=AuditAction.UPSTREAM_CHANGED)
    assert (event.user, event.target, event.detail["change"]) == (ada, "docs", "removed")


def test_stdio_is_refused_even_when_posted(client, tenant, ada):
    command, _ = stdio_command()

    response = client.post(
        upstreams_url(tenant, "add/"), console_form(transport="stdio", url="", command=command)
    )

    assert response.status_code == 422
    assert escape(STDIO_OPERATORS_ONLY) in response.content.decode()
    assert not Upstream.objects.exists()


def test_an_operators_stdio_upstream_is_listed_but_never_changed_tested_or_removed(client, tenant, ada):
    command, args = stdio_command()
    upstream_row(tenant=tenant.slug, name="local", transport=Transport.STDIO, command=command, args=args)

    page = client.get(upstreams_url(tenant)).content.decode()
    statuses = [
        client.post(upstreams_url(tenant, f"local/{action}/"), console_form(name="local")).status_code
        for action in ("change", "test", "remove")
    ]

    assert "<code>local</code>" in page
    assert "Operators only" in page
    assert statuses == [403, 403, 403]
    assert Upstream.objects.get(name="local").transport == Transport.STDIO
    assert (
        escape(OPERATORS_ONLY.format(name="local"))
        in client.get(upstreams_url(tenant, "?change=local")).content.decode()
    )


def test_a_viewer_sees_no_forms_and_their_posts_change_nothing(client, tenant, vic):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp", tool_names=["search"])

    page = client.get(upstreams_url(tenant)).content.decode()
    posts = [
        ("add/", console_form(name="sneaky")),
        ("docs/change/", console_form(url="https://evil.example/mcp")),
    ]
    posts += [("docs/test/", {}), ("docs/remove/", {})]
    statuses = [client.post(upstreams_url(tenant, path), data).status_code for path, data in posts]

    assert "<li><code>search</code></li>" in page
    assert f'action="/console/{tenant.slug}/' not in page
    assert "Only the tenant&#x27;s admins change this" in page
    assert statuses == [403, 403, 403, 403]
    assert list(Upstream.objects.values_list("name", "url")) == [("docs", "https://docs.example/mcp")]
    assert not AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).exists()


def test_the_page_answers_a_get_and_the_changes_only_a_post(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="docs", url="https://docs.example/mcp")

    statuses = [client.post(upstreams_url(tenant)).status_code]
    statuses += [
        client.get(upstreams_url(tenant, path)).status_code for path in ("add/", "docs/test/", "docs/remove/")
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
        response = client.get(upstreams_url(tenant))

    assert response.status_code == 200

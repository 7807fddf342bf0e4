"""Operators configure upstreams in the admin: saving tests the connection and shows what it found,
what the service refuses is a form error beside its field, secrets are write-only (never on a
page, nor in a log line), and staff who are not superusers never touch a stdio upstream. An OAuth
sign-in upstream says who connected it, never a token."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.utils import timezone
from django.utils.html import escape

from core.crypto import secret_decrypt, secret_encrypt
from tests.e2e.harness import free_port
from tests.support.admin_support import admin_url, post_action
from tests.support.factories import UserFactory
from tests.support.upstream_support import UpstreamProcess, stdio_command, upstream_row
from upstreams.admin import SIGN_IN_NOT_CONNECTED
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.sign_in.models import UpstreamGrant

pytestmark = pytest.mark.django_db

SECRET = "adm-s3cr3t-77c1"
ENV_SECRET = "env-s3cr3t-5b0d"


def _form(tenant, **overrides: Any) -> dict[str, Any]:
    data = {
        "tenant": tenant.pk,
        "name": "docs",
        "enabled": "on",
        "transport": "http",
        "url": "",
        "command": "",
        "args": "",
        "env": "",
        "cwd": "",
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


def _stdio_form(tenant, **overrides: Any) -> dict[str, Any]:
    command, args = stdio_command()
    return _form(tenant, transport="stdio", command=command, args="\n".join(args), **overrides)


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _errors(response) -> dict[str, list[str]]:
    return response.context["adminform"].form.errors


def test_an_operator_adds_a_stdio_upstream_and_sees_what_it_publishes(client, operator, tenant):
    response = client.post(
        admin_url(Upstream, "add"),
        _stdio_form(tenant, exclude_tools="fail, sleep", prefix_tools="on"),
        follow=True,
    )
    assert response.status_code == 200
    assert "Connected: 7 tools, 1 resource, 1 resource template, 1 prompt." in _messages(response)
    upstream = Upstream.objects.get()
    assert upstream.exclude_tools == ["fail", "sleep"]
    assert upstream.tool_names == [
        "docs_add_tool",
        "docs_ask_model",
        "docs_ask_name",
        "docs_count_to",
        "docs_echo",
        "docs_flood_list_changed",
        "docs_received_headers",
    ]
    assert upstream.args == stdio_command()[1]


def test_a_header_secret_is_write_only_and_in_no_log_line(client, operator, tenant, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    process = UpstreamProcess("http", workdir=tmp_path).start()
    try:
        response = client.post(
            admin_url(Upstream, "add"),
            _form(tenant, url=process.url, auth="header", header_name="X-Upstream-Key", header_value=SECRET),
        )
        assert response.status_code == 302, _errors(response)
    finally:
        process.kill()
    upstream = Upstream.objects.get()
    assert secret_decrypt(token=upstream.header_value_encrypted) == SECRET
    page = client.get(admin_url(Upstream, "change", upstream.pk)).content.decode()
    assert "Stored encrypted; never shown." in page
    assert SECRET not in page
    assert upstream.header_value_encrypted not in page
    assert SECRET not in client.get(admin_url(Upstream, "changelist")).content.decode()
    assert caplog.records
    assert SECRET not in caplog.text


def test_a_blank_secret_keeps_the_stored_one_and_the_environment_is_write_only(client, operator, tenant):
    response = client.post(
        admin_url(Upstream, "add"), _stdio_form(tenant, enabled=None, env=f"API_KEY={ENV_SECRET}\nMODE=x")
    )
    assert response.status_code == 302, _errors(response)
    upstream = Upstream.objects.get()
    page = client.get(admin_url(Upstream, "change", upstream.pk)).content.decode()
    assert ENV_SECRET not in page
    assert "API_KEY" not in page
    # Saved again with the environment box blank: the stored one is kept.
    response = client.post(
        admin_url(Upstream, "change", upstream.pk), _stdio_form(tenant, enabled=None, cwd="/")
    )
    assert response.status_code == 302, _errors(response)
    upstream.refresh_from_db()
    assert upstream.cwd == "/"
    assert ENV_SECRET in secret_decrypt(token=upstream.env_encrypted)
    response = client.post(
        admin_url(Upstream, "change", upstream.pk), _stdio_form(tenant, enabled=None, remove_env="on")
    )
    assert response.status_code == 302, _errors(response)
    upstream.refresh_from_db()
    assert upstream.env_encrypted == ""


def test_an_environment_line_without_a_value_is_refused_by_number_only(client, operator, tenant):
    response = client.post(
        admin_url(Upstream, "add"), _stdio_form(tenant, enabled=None, env=f"A=1\n{ENV_SECRET}")
    )
    assert response.status_code == 200
    assert _errors(response)["env"] == ["Line 2 is not NAME=VALUE."]
    assert ENV_SECRET not in response.content.decode()


@pytest.mark.parametrize(
    ("overrides", "field", "says"),
    [
        ({"url": "http://user:pw@example.com/mcp"}, "url", "must not carry credentials"),
        ({"url": "ftp://example.com/"}, "url", "http:// or https://"),
        ({"url": "http://example.com/\x00"}, "url", "Null characters"),
        (
            {"url": "http://example.com/mcp", "auth": "header", "header_name": "X Key"},
            "header_name",
            "header name",
        ),
        (
            {"url": "http://example.com/mcp", "auth": "header", "header_name": "X-Key"},
            "header_value",
            "needed",
        ),
        ({"url": "http://example.com/mcp", "include_tools": "a\x00"}, "include_tools", "Null characters"),
        ({"url": "http://example.com/mcp", "name": "Not_A_Slug"}, "name", "lowercase"),
    ],
)
def test_what_the_service_refuses_is_a_form_error_beside_its_field(
    client, operator, tenant, overrides, field, says
):
    response = client.post(admin_url(Upstream, "add"), _form(tenant, **overrides))
    assert response.status_code == 200
    assert says in " ".join(_errors(response)[field])
    assert not Upstream.objects.exists()


def test_an_upstream_that_is_down_is_refused_on_the_form(client, operator, tenant):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    response = client.post(admin_url(Upstream, "add"), _form(tenant, url=url))
    assert response.status_code == 200
    assert _errors(response)["__all__"][0].startswith(
        f"Connection test failed: could not connect to {url}: connection refused."
    )
    assert not Upstream.objects.exists()


def test_a_name_collision_is_refused_with_the_prefix_suggested(client, operator, tenant):
    upstream_row(tenant=tenant.slug, name="github", url="http://127.0.0.1:9/mcp", tool_names=["echo"])
    response = client.post(admin_url(Upstream, "add"), _stdio_form(tenant, include_tools="echo"))
    assert response.status_code == 200
    assert _errors(response)["prefix_tools"] == [
        "Tool names already taken: echo (upstream 'github'). "
        "Turn on prefix tools to publish them as docs_echo."
    ]
    assert not Upstream.objects.filter(name="docs").exists()


def test_the_test_action_shows_each_upstreams_count_or_error(client, operator, tenant):
    command, args = stdio_command()
    good = upstream_row(
        tenant=tenant.slug, name="docs", transport=Transport.STDIO, command=command, args=args
    )
    url = f"http://127.0.0.1:{free_port()}/mcp"
    down = upstream_row(tenant=tenant.slug, name="down", url=url)
    response = post_action(client, Upstream, "test_connection", [good, down])
    assert sorted(_messages(response)) == [
        "docs: connected, 9 tools, 1 resource, 1 resource template, 1 prompt.",
        f"down: could not connect to {url}: connection refused",
    ]


@pytest.fixture
def staff(client):
    """Staff with every permission on upstreams, but not a superuser."""
    user = UserFactory.create(username="staff", is_staff=True)
    for action in ("add", "change", "delete", "view"):
        user.user_permissions.add(Permission.objects.get(codename=f"{action}_upstream"))
    client.force_login(user)
    return user


def test_staff_cannot_choose_stdio_nor_see_the_command_fields(client, staff, tenant):
    page = client.get(admin_url(Upstream, "add"))
    form = page.context["adminform"].form
    assert [value for value, _ in form.fields["transport"].choices] == ["http", "sse", "openapi"]
    assert 'name="command"' not in page.content.decode()
    response = client.post(admin_url(Upstream, "add"), _stdio_form(tenant, enabled=None))
    assert response.status_code == 200
    assert "transport" in _errors(response)
    assert not Upstream.objects.exists()


def test_staff_see_a_stdio_upstream_read_only_and_cannot_change_or_delete_it(client, staff, tenant):
    command, args = stdio_command()
    upstream = upstream_row(
        tenant=tenant.slug, name="local", transport=Transport.STDIO, command=command, args=args
    )
    page = client.get(admin_url(Upstream, "change", upstream.pk))
    assert page.status_code == 200
    assert not page.context["has_change_permission"]
    response = client.post(
        admin_url(Upstream, "change", upstream.pk), _form(tenant, url="http://example.com/mcp")
    )
    assert response.status_code == 403
    assert client.post(admin_url(Upstream, "delete", upstream.pk), {"post": "yes"}).status_code == 403
    upstream.refresh_from_db()
    assert upstream.transport == Transport.STDIO


def test_staff_can_configure_an_http_upstream(client, staff, tenant):
    response = client.post(
        admin_url(Upstream, "add"), _form(tenant, url="http://example.com/mcp", enabled=None)
    )
    assert response.status_code == 302, _errors(response)
    assert Upstream.objects.get().auth == AuthKind.NONE


def test_staff_cannot_delete_a_stdio_upstream_in_bulk(client, staff, tenant):
    command, args = stdio_command()
    local = upstream_row(
        tenant=tenant.slug, name="local", transport=Transport.STDIO, command=command, args=args
    )
    response = client.post(
        admin_url(Upstream, "changelist"),
        {"action": "delete_selected", "_selected_action": [local.pk], "post": "yes"},
    )
    assert response.status_code == 403
    assert Upstream.objects.filter(pk=local.pk).exists()


def test_an_operator_editing_an_upstream_tests_it_again(client, operator, tenant):
    command, args = stdio_command()
    upstream = upstream_row(
        tenant=tenant.slug,
        name="docs",
        transport=Transport.STDIO,
        command=command,
        args=args,
        tool_names=["old"],
    )
    response = client.post(
        admin_url(Upstream, "change", upstream.pk), _stdio_form(tenant, include_tools="echo")
    )
    assert response.status_code == 302, _errors(response)
    upstream.refresh_from_db()
    assert upstream.tool_names == ["echo"]
    assert upstream.last_tested is not None


def test_an_oauth_sign_in_upstream_shows_who_connected_it_and_never_a_token(client, operator, tenant):
    upstream = upstream_row(
        tenant=tenant.slug, name="crm", url="https://crm.example/mcp", auth=AuthKind.OAUTH_CODE, enabled=False
    )
    grant = UpstreamGrant.objects.create(
        upstream=upstream,
        tokens_encrypted=secret_encrypt(plaintext='{"access_token": "adm-t0ken-51c3"}'),
        connected_by=operator,
        connected_at=timezone.now(),
    )

    page = client.get(admin_url(Upstream, "change", upstream.pk)).content.decode()

    assert "Connected by operator, " in page
    assert "adm-t0ken-51c3" not in page
    assert grant.tokens_encrypted not in page


def test_an_oauth_sign_in_upstream_not_yet_connected_says_where_to_connect_it(client, operator, tenant):
    upstream = upstream_row(
        tenant=tenant.slug, name="crm", url="https://crm.example/mcp", auth=AuthKind.OAUTH_CODE, enabled=False
    )

    page = client.get(admin_url(Upstream, "change", upstream.pk)).content.decode()

    assert escape(SIGN_IN_NOT_CONNECTED) in page

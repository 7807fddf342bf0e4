"""An upstream's configuration is refused, field by field, before anything connects: hostile text,
huge lists, URLs with credentials or of other schemes, commands from non-operators."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from tests.support.upstream_support import upstream_row
from tests.upstreams.support import stdio_fields, unsaved
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.services import upstream_save
from upstreams.validation import STDIO_OPERATORS_ONLY, upstream_validate

pytestmark = pytest.mark.django_db


def _refused(upstream: Upstream, *, allow_stdio: bool = True, **secrets) -> InvalidInput:
    with pytest.raises(InvalidInput) as refusal:
        upstream_validate(
            upstream=upstream,
            allow_stdio=allow_stdio,
            header_value=secrets.get("header_value"),
            oauth_client_secret=secrets.get("oauth_client_secret"),
            env=secrets.get("env"),
        )
    return refusal.value


def _field(refusal: InvalidInput) -> str:
    return (refusal.data or {})["field"]


@pytest.mark.parametrize(
    "name",
    ["", "Docs", "docs_v2", "-docs", "d" * 41, "doc s", "docs\x00", "docs\ud800", "ünï", "docs\n"],
)
def test_a_name_that_is_not_a_short_lowercase_slug_is_refused(tenant, name):
    assert _field(_refused(unsaved(tenant, name=name))) == "name"


def test_a_name_taken_in_the_tenant_is_refused_but_free_in_another(tenant, outsider):
    upstream_row(tenant=tenant.slug, name="docs", url="http://127.0.0.1:9/mcp")
    refusal = _refused(unsaved(tenant, name="docs"))
    assert refusal.message == "name: the tenant already has an upstream named 'docs'."
    upstream_validate(
        upstream=unsaved(outsider.tenant, name="docs"),
        allow_stdio=False,
        header_value=None,
        oauth_client_secret=None,
        env=None,
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "required"),
        ("ftp://example.com/mcp", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("javascript:alert(1)", "http:// or https://"),
        ("http:///mcp", "http:// or https://"),
        ("http://user:pass@example.com/mcp", "must not carry credentials"),
        ("http://token@example.com/mcp", "must not carry credentials"),
        ("http://example.com:99999/mcp", "not a valid URL"),
        ("http://example.com/m cp", "spaces"),
        ("http://example.com/\r\nX-Evil: 1", "control characters"),
        ("http://example.com/\x00", "NUL"),
        ("http://example.com/\ud800", "surrogate"),
        ("http://example.com/" + "a" * 2000, "at most 2000"),
    ],
)
def test_a_url_that_is_not_a_plain_http_url_is_refused(tenant, url, says):
    refusal = _refused(unsaved(tenant, url=url))
    assert _field(refusal) == "url"
    assert says in refusal.message
    # The message names the problem, never echoes credentials.
    assert "pass" not in refusal.message


def test_an_unknown_transport_or_auth_is_refused(tenant):
    assert _field(_refused(unsaved(tenant, transport="ftp"))) == "transport"
    assert _field(_refused(unsaved(tenant, auth="kerberos"))) == "auth"


def test_a_stdio_upstream_is_refused_to_anyone_but_an_operator(tenant):
    refusal = _refused(unsaved(tenant, **stdio_fields()), allow_stdio=False)
    assert refusal.message == STDIO_OPERATORS_ONLY
    assert _field(refusal) == "transport"


def test_the_service_refuses_stdio_without_allow_stdio_and_saves_nothing(tenant):
    with pytest.raises(InvalidInput, match="Only operators may configure stdio upstreams"):
        upstream_save(upstream=unsaved(tenant, **stdio_fields()), allow_stdio=False)
    assert not Upstream.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"command": ""}, "command"),
        ({"command": "python\x00"}, "command"),
        ({"command": "python\ud800"}, "command"),
        ({"args": "not a list"}, "args"),
        ({"args": [1, 2]}, "args"),
        ({"args": ["ok", "nul\x00"]}, "args"),
        ({"args": ["x"] * 101}, "args"),
        ({"args": ["x" * 2001]}, "args"),
        ({"cwd": "/no/such/directory"}, "cwd"),
        ({"cwd": "relative/path"}, "cwd"),
        ({"cwd": "/usr\x00"}, "cwd"),
        ({"pass_identity": True}, "pass_identity"),
        ({"auth": AuthKind.HEADER, "header_name": "X-Key"}, "auth"),
        ({"auth": AuthKind.OAUTH, "oauth_client_id": "id"}, "auth"),
    ],
)
def test_a_bad_stdio_configuration_is_refused_naming_the_field(tenant, fields, field):
    upstream = unsaved(tenant, **{**stdio_fields(), **fields})
    assert _field(_refused(upstream, header_value="v", oauth_client_secret="s")) == field


@pytest.mark.parametrize(
    "env",
    [
        {"1BAD": "x"},
        {"BAD-NAME": "x"},
        {"": "x"},
        {"NUL\x00": "x"},
        {"KEY": "nul\x00"},
        {"KEY": "\udc80"},
        {"KEY": 1},
        {"KEY": "x" * 10_001},
        {f"K{i}": "x" for i in range(101)},
        ["KEY=x"],
    ],
)
def test_a_bad_environment_is_refused_without_repeating_its_values(tenant, env):
    refusal = _refused(unsaved(tenant, **stdio_fields()), env=env)
    assert _field(refusal) == "env"
    assert "x" * 20 not in refusal.message


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"connect_timeout_seconds": 0}, "connect_timeout_seconds"),
        ({"connect_timeout_seconds": 121}, "connect_timeout_seconds"),
        ({"connect_timeout_seconds": float("nan")}, "connect_timeout_seconds"),
        ({"connect_timeout_seconds": float("inf")}, "connect_timeout_seconds"),
        ({"connect_timeout_seconds": True}, "connect_timeout_seconds"),
        ({"call_timeout_seconds": "60"}, "call_timeout_seconds"),
        ({"call_timeout_seconds": 3601}, "call_timeout_seconds"),
        ({"include_tools": "echo"}, "include_tools"),
        ({"include_tools": ["echo"] * 501}, "include_tools"),
        ({"include_tools": ["e" * 201]}, "include_tools"),
        ({"include_tools": [""]}, "include_tools"),
        ({"include_tools": [{"nested": ["deep"]}]}, "include_tools"),
        ({"exclude_tools": ["echo\x00"]}, "exclude_tools"),
        ({"exclude_tools": ["\ud800"]}, "exclude_tools"),
        ({"scopes": []}, "scopes"),
        ({"scopes": ["mcp:root"]}, "scopes"),
        ({"scopes": "mcp:read"}, "scopes"),
        ({"scopes": ["mcp:read"] * 21}, "scopes"),
        ({"oauth_scope": "a\x00"}, "oauth_scope"),
        ({"header_name": "X-\ud800"}, "header_name"),
    ],
)
def test_bad_limits_selections_and_scopes_are_refused_naming_the_field(tenant, fields, field):
    assert _field(_refused(unsaved(tenant, **fields))) == field


@pytest.mark.parametrize(
    ("fields", "secrets", "field"),
    [
        ({"header_name": ""}, {"header_value": "v"}, "header_name"),
        ({"header_name": "X Key"}, {"header_value": "v"}, "header_name"),
        ({"header_name": "X-Key:"}, {"header_value": "v"}, "header_name"),
        ({"header_name": "Host"}, {"header_value": "v"}, "header_name"),
        ({"header_name": "X-Gatehouse-User"}, {"header_value": "v"}, "header_name"),
        ({"header_name": "X-Key"}, {}, "header_value"),
        ({"header_name": "X-Key"}, {"header_value": ""}, "header_value"),
        ({"header_name": "X-Key"}, {"header_value": "v\r\nX-Evil: 1"}, "header_value"),
        ({"header_name": "X-Key"}, {"header_value": "v\x00"}, "header_value"),
        ({"header_name": "X-Key"}, {"header_value": "\ud800"}, "header_value"),
        ({"header_name": "X-Key"}, {"header_value": "v" * 8001}, "header_value"),
    ],
)
def test_a_header_credential_needs_a_token_name_and_a_clean_value(tenant, fields, secrets, field):
    upstream = unsaved(tenant, auth=AuthKind.HEADER, **fields)
    refusal = _refused(upstream, **secrets)
    assert _field(refusal) == field
    assert "X-Evil" not in refusal.message


def test_a_stored_header_value_is_kept_when_none_is_given(tenant):
    upstream = unsaved(tenant, auth=AuthKind.HEADER, header_name="X-Key", header_value_encrypted="stored")
    upstream_validate(
        upstream=upstream, allow_stdio=False, header_value=None, oauth_client_secret=None, env=None
    )


@pytest.mark.parametrize(
    ("fields", "secret", "field"),
    [
        ({"oauth_client_id": ""}, "s", "oauth_client_id"),
        ({"oauth_client_id": "id"}, None, "oauth_client_secret"),
        ({"oauth_client_id": "id"}, "s\x00", "oauth_client_secret"),
        ({"oauth_client_id": "i" * 501}, "s", "oauth_client_id"),
    ],
)
def test_oauth_needs_a_client_id_and_a_secret(tenant, fields, secret, field):
    upstream = unsaved(tenant, auth=AuthKind.OAUTH, transport=Transport.SSE, **fields)
    assert _field(_refused(upstream, oauth_client_secret=secret)) == field


def test_an_upstream_needs_a_tenant():
    assert _field(_refused(Upstream(name="docs", url="http://127.0.0.1:9/mcp"))) == "tenant"

"""Every save and removal of an upstream is audited by the service, whichever way it came (the
admin, the command line, the tenant console: tests/portal/console_upstreams/): who, which
upstream, what changed by field name, and a credential only as replaced or removed."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import AuditAction, AuditEvent
from tests.support.admin_support import admin_url
from tests.upstreams.support import unsaved
from upstreams.models import AuthKind, Upstream
from upstreams.services import upstream_remove, upstream_save

pytestmark = pytest.mark.django_db

SECRET = "audit-s3cr3t-0c9a"


def _form(tenant, **overrides: Any) -> dict[str, Any]:
    data = {
        "tenant": tenant.pk,
        "name": "docs",
        "transport": "http",
        "url": "https://docs.example/mcp",
        "command": "",
        "args": "",
        "env": "",
        "cwd": "",
        "connect_timeout_seconds": "10",
        "call_timeout_seconds": "60",
        "include_tools": "",
        "exclude_tools": "",
        "scopes": ["mcp:read"],
        "auth": "header",
        "header_name": "X-Key",
        "header_value": SECRET,
        "oauth_client_id": "",
        "oauth_client_secret": "",
        "oauth_scope": "",
        **overrides,
    }
    return data


def _events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED).order_by("pk"))


def test_an_upstream_saved_in_the_admin_is_audited_with_the_operator_and_no_secret(client, operator, tenant):
    response = client.post(admin_url(Upstream, "add"), _form(tenant))

    assert response.status_code == 302
    [event] = _events()
    assert (event.user, event.tenant, event.target, event.detail["change"]) == (
        operator,
        tenant,
        "docs",
        "added",
    )
    assert event.detail["header_value"] == "replaced"
    assert SECRET not in str(event.detail)


def test_an_upstream_deleted_in_the_admin_is_audited_with_the_operator(client, operator, tenant):
    upstream = Upstream.objects.create(
        tenant=tenant, name="docs", url="https://docs.example/mcp", enabled=False
    )

    client.post(admin_url(Upstream, "delete", upstream.pk), {"post": "yes"})

    [event] = _events()
    assert (event.user, event.target, event.detail["change"], event.detail["upstream_id"]) == (
        operator,
        "docs",
        "removed",
        upstream.pk,
    )


def test_a_change_names_only_the_fields_that_changed(tenant):
    upstream = unsaved(tenant, enabled=False, auth=AuthKind.HEADER, header_name="X-Key")
    upstream_save(upstream=upstream, allow_stdio=False, header_value=SECRET)

    upstream.url = "https://elsewhere.example/mcp"
    upstream_save(upstream=upstream, allow_stdio=False)
    upstream.auth = AuthKind.NONE
    upstream_save(upstream=upstream, allow_stdio=False, header_value="")
    upstream_remove(upstream=upstream)

    details = [event.detail for event in _events()]
    assert [(d["change"], d.get("fields")) for d in details[1:]] == [
        ("changed", ["url"]),
        ("changed", ["auth", "header_value"]),
        ("removed", None),
    ]
    assert details[2]["header_value"] == "removed"
    assert [event.user for event in _events()] == [None, None, None, None]

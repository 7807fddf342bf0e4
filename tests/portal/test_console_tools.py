"""The console's tools section: every toolset this deployment serves, on or off for the tenant, each
tool with the scopes it needs; an admin switches one off or on (the service the admin and
``manage.py toolsets`` use, audited); a viewer sees no forms and a viewer's post changes nothing;
unknown toolsets and hostile values get the page's own error; another tenant is a 404."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from core.models import AuditAction, AuditEvent
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolsets_enabled
from mcp_gateway.models import TenantToolset
from oauth.parameter_guard import PARAMETER_HAS_NUL, PARAMETER_NOT_UTF8
from portal.console.tools import ALREADY, STATE_UNKNOWN, SWITCHED
from portal.console.toolsets import UNKNOWN_TOOLSET
from tests.support.factories import TenantFactory
from tests.support.upstream_support import upstream_row

pytestmark = pytest.mark.django_db

# A toolset every deployment serves and every tenant has unless switched off, with scoped tools.
TOOLSET = "account"


def _tools_url(tenant) -> str:
    return f"/console/{tenant.slug}/tools/"


def _toggle_url(tenant) -> str:
    return f"/console/{tenant.slug}/tools/toggle/"


def _enabled(tenant) -> frozenset[str]:
    return toolsets_enabled(tenant_id=tenant.pk, registry=default_registry())


def test_the_page_lists_every_toolset_with_its_tools_and_their_scopes(client, tenant, ada):
    page = client.get(_tools_url(tenant)).content.decode()
    registry = default_registry()
    assert 'id="toolset-workflows"' in page
    assert [t.name for t in registry.toolsets if f'id="toolset-{t.name}"' not in page] == []
    spec = registry.get("whoami")
    assert spec is not None
    assert spec.scopes
    assert "<code>whoami</code>" in page
    assert [s for s in spec.scopes if f"<code>{s}</code>" not in page] == []
    assert 'aria-current="page">Tools</a>' in page


def test_the_page_says_which_toolsets_are_on(client, tenant, ada):
    TenantToolset.objects.create(tenant=tenant, toolset=TOOLSET, enabled=False)
    page = client.get(_tools_url(tenant)).content.decode()
    assert f"Switch {TOOLSET} on</button>" in page
    assert f"Switch {TOOLSET} off</button>" not in page


def test_an_admin_switches_a_toolset_off_and_on_again_each_audited(client, tenant, ada):
    response = client.post(_toggle_url(tenant), {"toolset": TOOLSET, "state": "off"})
    assert response.status_code == 302
    assert response["Location"] == _tools_url(tenant)
    assert TOOLSET not in _enabled(tenant)
    page = client.get(response["Location"]).content.decode()
    assert SWITCHED.format(toolset=TOOLSET, state="off", tenant=tenant.name) in page

    client.post(_toggle_url(tenant), {"toolset": TOOLSET, "state": "on"})
    assert TOOLSET in _enabled(tenant)
    rows = AuditEvent.objects.filter(action=AuditAction.TOOLSET_SWITCHED).order_by("created", "pk")
    assert [(r.user_id, r.tenant_id, r.target, r.detail["to"]) for r in rows] == [
        (ada.pk, tenant.pk, TOOLSET, "off"),
        (ada.pk, tenant.pk, TOOLSET, "on"),
    ]


def test_switching_to_the_state_it_has_changes_and_records_nothing(client, tenant, ada):
    response = client.post(_toggle_url(tenant), {"toolset": TOOLSET, "state": "on"}, follow=True)
    assert ALREADY.format(toolset=TOOLSET, state="on", tenant=tenant.name) in response.content.decode()
    assert not TenantToolset.objects.filter(tenant=tenant).exists()
    assert not AuditEvent.objects.filter(action=AuditAction.TOOLSET_SWITCHED).exists()


def test_a_viewer_sees_the_page_without_forms(client, tenant, vic):
    page = client.get(_tools_url(tenant)).content.decode()
    assert "<code>whoami</code>" in page
    assert "/tools/toggle/" not in page
    assert "your role here is viewer" in page


def test_a_viewers_post_is_refused_and_changes_nothing(client, tenant, vic):
    response = client.post(_toggle_url(tenant), {"toolset": TOOLSET, "state": "off"})
    assert response.status_code == 403
    assert TOOLSET in _enabled(tenant)
    assert not TenantToolset.objects.filter(tenant=tenant).exists()


def test_an_unknown_toolset_gets_the_pages_own_error(client, tenant, ada):
    response = client.post(_toggle_url(tenant), {"toolset": "nonesuch", "state": "off"})
    assert response.status_code == 422
    page = response.content.decode()
    assert 'id="tools-error"' in page
    assert escape(UNKNOWN_TOOLSET.format(name="nonesuch")) in page
    assert not TenantToolset.objects.filter(tenant=tenant).exists()


def test_a_state_other_than_on_or_off_is_refused(client, tenant, ada):
    response = client.post(_toggle_url(tenant), {"toolset": TOOLSET, "state": "maybe"})
    assert response.status_code == 422
    assert STATE_UNKNOWN in response.content.decode()
    assert TOOLSET in _enabled(tenant)


def test_a_huge_toolset_name_is_refused_and_not_repeated_in_full(client, tenant, ada):
    response = client.post(_toggle_url(tenant), {"toolset": "x" * 100_000, "state": "off"})
    assert response.status_code == 422
    assert "x" * 61 not in response.content.decode()


def test_a_nul_in_the_form_is_refused_with_the_pages_error(client, tenant, ada):
    response = client.post(_toggle_url(tenant), {"toolset": f"{TOOLSET}\x00", "state": "off"})
    assert response.status_code == 400
    assert escape(PARAMETER_HAS_NUL.format(name=repr("toolset"))) in response.content.decode()
    assert TOOLSET in _enabled(tenant)


def test_invalid_utf8_in_the_form_is_refused_with_the_pages_error(client, tenant, ada):
    body = b"toolset=account%FF&state=off"
    response = client.post(_toggle_url(tenant), body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert escape(PARAMETER_NOT_UTF8.format(name=repr("toolset"))) in response.content.decode()
    assert TOOLSET in _enabled(tenant)


def test_another_tenants_toolsets_are_a_404_and_stay_as_they_were(client, tenant, ada):
    other = TenantFactory.create(slug="other-tenant")
    assert client.get(_tools_url(other)).status_code == 404
    response = client.post(_toggle_url(other), {"toolset": TOOLSET, "state": "off"})
    assert response.status_code == 404
    assert TOOLSET in _enabled(other)


def test_the_page_answers_a_get_and_the_switch_only_a_post(client, tenant, ada):
    assert client.post(_tools_url(tenant)).status_code == 405
    assert client.get(_toggle_url(tenant)).status_code == 405


def test_the_tenants_upstreams_are_listed_and_no_other_tenants(client, tenant, ada):
    other = TenantFactory.create(slug="other-tenant")
    upstream_row(tenant=tenant.slug, name="search", url="https://search.example/mcp", tool_names=["a", "b"])
    upstream_row(tenant=other.slug, name="elsewhere", url="https://elsewhere.example/mcp")
    page = client.get(_tools_url(tenant)).content.decode()
    assert "<code>search</code>" in page
    assert "Streamable HTTP" in page
    assert "elsewhere" not in page


def test_the_page_takes_a_bounded_number_of_queries(client, tenant, ada, django_assert_max_num_queries):
    for number in range(5):
        upstream_row(tenant=tenant.slug, name=f"server-{number}", url=f"https://s{number}.example/mcp")
    TenantToolset.objects.create(tenant=tenant, toolset=TOOLSET, enabled=False)
    with django_assert_max_num_queries(6):
        assert client.get(_tools_url(tenant)).status_code == 200

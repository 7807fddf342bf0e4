"""The tenant page's toolsets inline in the admin (``mcp_gateway.admin``): each switch made there
is ``toolset_set_enabled``'s, as the console's and ``manage.py toolsets``' are, and so is audited
as ``toolset.switched`` with the operator's name; saving the page unchanged records nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils.html import escape

from core.models import AuditAction, AuditEvent
from mcp_gateway.admin import TOOLSET_FIXED
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.models import TenantToolset

pytestmark = pytest.mark.django_db


def _page_data(page: Any) -> dict[str, str]:
    """What the browser would post back for the change page as it was rendered."""
    data: dict[str, str] = {}
    forms = [page.context["adminform"].form]
    for inline in page.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    for form in forms:
        for name in form.fields:
            bound = form[name]
            value = bound.value()
            if value is True:
                data[bound.html_name] = "on"
            elif value is not None and value is not False:
                data[bound.html_name] = str(value)
    return data


def _change_url(tenant) -> str:
    return reverse("admin:accounts_tenant_change", args=[tenant.pk])


def _row_prefix(page: Any, toolset: str) -> str:
    for inline in page.context["inline_admin_formsets"]:
        for form in inline.formset.forms:
            if form.instance.toolset == toolset:
                return form.prefix
    raise AssertionError(f"no row for {toolset}")


def test_switching_a_toolset_off_in_the_inline_is_audited_with_the_operators_name(client, operator, tenant):
    TenantToolset.objects.create(tenant=tenant, toolset="account", enabled=True)
    page = client.get(_change_url(tenant))
    data = _page_data(page)
    del data[f"{_row_prefix(page, 'account')}-enabled"]

    response = client.post(_change_url(tenant), data)

    assert response.status_code == 302, response.content.decode()[:2000]
    assert TenantToolset.objects.get(tenant=tenant, toolset="account").enabled is False
    row = AuditEvent.objects.get(action=AuditAction.TOOLSET_SWITCHED)
    assert (row.user, row.username, row.tenant, row.target) == (operator, "operator", tenant, "account")
    assert (row.detail["from"], row.detail["to"]) == ("on", "off")


def test_saving_the_tenant_page_unchanged_records_no_switch(client, operator, tenant):
    TenantToolset.objects.create(tenant=tenant, toolset="account", enabled=True)

    response = client.post(_change_url(tenant), _page_data(client.get(_change_url(tenant))))

    assert response.status_code == 302
    assert not AuditEvent.objects.filter(action=AuditAction.TOOLSET_SWITCHED).exists()


def test_a_row_cannot_be_turned_into_another_toolsets(client, operator, tenant):
    TenantToolset.objects.create(tenant=tenant, toolset="account", enabled=True)
    page = client.get(_change_url(tenant))
    data = _page_data(page)
    other = next(toolset.name for toolset in default_registry().toolsets if toolset.name != "account")
    data[f"{_row_prefix(page, 'account')}-toolset"] = other

    response = client.post(_change_url(tenant), data)

    assert response.status_code == 200
    assert escape(TOOLSET_FIXED) in response.content.decode()
    assert list(TenantToolset.objects.values_list("toolset", flat=True)) == ["account"]

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from core.models import AuditAction, AuditEvent
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolsets_enabled
from mcp_gateway.models import TenantToolset

pytestmark = pytest.mark.django_db


def test_the_account_toolset_is_on_by_default(tenant, capsys):
    call_command("toolsets", "list", tenant.slug)
    assert "enabled   account" in capsys.readouterr().out


def test_disabling_and_enabling_a_toolset_is_recorded_per_tenant(tenant, outsider):
    call_command("toolsets", "disable", tenant.slug, "account")
    assert "account" not in toolsets_enabled(tenant_id=tenant.pk, registry=default_registry())
    assert "account" in toolsets_enabled(tenant_id=outsider.tenant.pk, registry=default_registry())
    call_command("toolsets", "enable", tenant.slug, "account")
    assert TenantToolset.objects.get(tenant=tenant, toolset="account").enabled is True


def test_an_unknown_toolset_is_refused_with_the_known_ones_named(tenant):
    with pytest.raises(CommandError, match=r"Unknown toolset 'nope'.*account"):
        call_command("toolsets", "enable", tenant.slug, "nope")
    assert not TenantToolset.objects.exists()


def test_an_unknown_tenant_is_refused():
    with pytest.raises(CommandError, match="No tenant"):
        call_command("toolsets", "list", "no-such-tenant")


def test_enable_needs_a_toolset_name(tenant):
    with pytest.raises(CommandError, match="Name the toolset"):
        call_command("toolsets", "enable", tenant.slug)


def test_a_switch_is_audited_as_made_by_the_command(tenant):
    call_command("toolsets", "disable", tenant.slug, "account")

    row = AuditEvent.objects.get(action=AuditAction.TOOLSET_SWITCHED)
    assert (row.user, row.tenant, row.target) == (None, tenant, "account")
    assert row.detail == {"toolset": "account", "from": "on", "to": "off", "via": "manage.py toolsets"}


def test_the_state_a_toolset_already_has_is_neither_written_nor_audited(tenant, capsys):
    call_command("toolsets", "enable", tenant.slug, "account")

    assert "account was already enabled" in capsys.readouterr().out
    assert not TenantToolset.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditAction.TOOLSET_SWITCHED).exists()

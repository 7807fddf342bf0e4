from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from accounts.models import Tenant
from core.models import AuditAction, AuditEvent
from mcp_gateway.models import McpSession, TerminationReason
from tests.support.factories import ApplicationFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def _session(key: str, *, idle: timedelta, ended: timedelta | None = None) -> McpSession:
    membership = MembershipFactory.create()
    now = timezone.now()
    return McpSession.objects.create(
        id=f"purge-test-{key}",
        user=membership.user,
        tenant=membership.tenant,
        application=ApplicationFactory(),
        scopes="mcp:read",
        protocol_version="2025-11-25",
        last_seen=now - idle,
        terminated_at=None if ended is None else now - ended,
        termination_reason="" if ended is None else "client",
    )


def test_it_ends_idle_sessions_and_deletes_old_ended_ones(capsys):
    live = _session("live", idle=timedelta(minutes=5))
    idle = _session("idle", idle=timedelta(hours=2))
    recently_ended = _session("recent", idle=timedelta(hours=2), ended=timedelta(days=1))
    long_ended = _session("old", idle=timedelta(days=9), ended=timedelta(days=8))

    call_command("purge")

    assert "Sessions: ended 1 idle, deleted 1 old." in capsys.readouterr().out
    live.refresh_from_db()
    idle.refresh_from_db()
    assert live.terminated_at is None
    assert idle.termination_reason == "expired"
    assert McpSession.objects.filter(pk=recently_ended.pk).exists()
    assert not McpSession.objects.filter(pk=long_ended.pk).exists()


def test_running_it_again_changes_nothing(capsys):
    _session("idle", idle=timedelta(hours=2))
    call_command("purge")
    call_command("purge")
    assert capsys.readouterr().out.splitlines()[-1].startswith("Sessions: ended 0 idle, deleted 0 old.")


def test_a_dry_run_reports_the_sessions_and_leaves_them(capsys):
    idle = _session("idle", idle=timedelta(hours=2))
    old = _session("old", idle=timedelta(days=9), ended=timedelta(days=8))
    call_command("purge", "--dry-run")
    assert "Sessions: would end 1 idle, would delete 1 old." in capsys.readouterr().out
    idle.refresh_from_db()
    assert idle.terminated_at is None
    assert McpSession.objects.filter(pk=old.pk).exists()


def test_it_ends_the_live_sessions_of_a_tenant_deactivated_in_bulk():
    live = _session("tenant-gone", idle=timedelta(minutes=5))
    # A bulk update sends no save signal: the purge is what ends these.
    Tenant.objects.filter(pk=live.tenant_id).update(is_active=False)
    other = _session("tenant-kept", idle=timedelta(minutes=5))

    call_command("purge")

    live.refresh_from_db()
    other.refresh_from_db()
    assert live.termination_reason == TerminationReason.TENANT
    assert other.terminated_at is None
    assert AuditEvent.objects.filter(
        session_id=live.id, action=AuditAction.SESSION_TERMINATED, detail__reason="tenant"
    ).exists()


def test_saving_a_tenant_inactive_ends_its_sessions_at_once():
    live = _session("tenant-saved", idle=timedelta(minutes=5))
    tenant = live.tenant
    tenant.is_active = False
    tenant.save()

    live.refresh_from_db()
    assert live.termination_reason == TerminationReason.TENANT

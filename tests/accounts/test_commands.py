"""The manage.py commands operators script: tenants, members, token revocation, purging."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import Membership, Tenant
from core.audit.retention import audit_purge
from core.models import AuditEvent
from oauth.models import AccessToken, RefreshToken
from tests.support.factories import (
    AccessTokenFactory,
    AuditEventFactory,
    MembershipFactory,
    RefreshTokenFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def _output(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out.strip()


# create_tenant


def test_create_tenant_creates_it(capsys):
    call_command("create_tenant", "initech", "--name", "Initech")
    assert _output(capsys) == "Created tenant initech (Initech)."
    tenant = Tenant.objects.get(slug="initech")
    assert (tenant.name, tenant.is_active) == ("Initech", True)


def test_create_tenant_twice_leaves_the_first_as_it_is(capsys, tenant):
    call_command("create_tenant", tenant.slug, "--name", "Another name")
    assert _output(capsys) == "Tenant acme-test (Acme Test) already exists; left unchanged."
    tenant.refresh_from_db()
    assert tenant.name == "Acme Test"


@pytest.mark.parametrize("slug", ["has spaces", "dots.not.allowed", "ünïcode", "x" * 64, ""])
def test_create_tenant_refuses_a_slug_the_admin_would_refuse(slug):
    with pytest.raises(CommandError, match=r"slug|characters|This field"):
        call_command("create_tenant", slug, "--name", "Whatever")
    assert not Tenant.objects.exists()


def test_create_tenant_needs_a_name():
    with pytest.raises(CommandError, match="--name"):
        call_command("create_tenant", "initech")
    with pytest.raises(CommandError, match="This field cannot be blank"):
        call_command("create_tenant", "initech", "--name", "")


# add_member


def test_add_member_adds_a_user_with_a_role(capsys, tenant):
    user = UserFactory.create(username="newcomer")
    call_command("add_member", "newcomer", tenant.slug, "--role", "contributor")
    assert _output(capsys) == "Added: newcomer is contributor in acme-test."
    assert Membership.objects.get(user=user, tenant=tenant).role == "contributor"


def test_add_member_changes_the_role_of_a_member(capsys, member):
    call_command("add_member", "member", member.tenant.slug, "--role", "admin")
    assert _output(capsys) == "Updated: member is admin in acme-test."
    member.refresh_from_db()
    assert member.role == "admin"
    assert Membership.objects.filter(user=member.user).count() == 1


def test_add_member_refuses_an_unknown_user(tenant):
    with pytest.raises(CommandError, match=r"No user 'nobody'\."):
        call_command("add_member", "nobody", tenant.slug, "--role", "viewer")


@pytest.mark.parametrize("name", ["no\x00body", "no\udcffbody"])
@pytest.mark.parametrize("command", ["add_member", "revoke_tokens"])
def test_a_name_that_cannot_be_stored_is_an_unknown_one_not_a_traceback(tenant, command, name):
    """A NUL or lone surrogate (invalid UTF-8 in argv) would fail the lookup in PostgreSQL."""
    args = [name, tenant.slug, "--role", "viewer"] if command == "add_member" else [name]
    with pytest.raises(CommandError, match=r"No user 'no\\(x00|udcff)body'\."):
        call_command(command, *args)
    if command == "add_member":
        UserFactory.create(username="newcomer")
        with pytest.raises(CommandError, match=r"No tenant"):
            call_command(command, "newcomer", name, "--role", "viewer")


def test_add_member_refuses_an_unknown_tenant():
    UserFactory.create(username="newcomer")
    with pytest.raises(CommandError, match=r"No tenant 'nowhere'\."):
        call_command("add_member", "newcomer", "nowhere", "--role", "viewer")
    assert not Membership.objects.exists()


def test_add_member_refuses_an_unknown_role(tenant):
    UserFactory.create(username="newcomer")
    with pytest.raises(CommandError, match="invalid choice: 'owner'"):
        call_command("add_member", "newcomer", tenant.slug, "--role", "owner")
    assert not Membership.objects.exists()


# revoke_tokens


def test_revoke_tokens_revokes_every_token_of_the_user_and_audits_each(capsys, member, outsider):
    refresh = RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=member))
    unbound = AccessTokenFactory.create(membership=member)
    elsewhere = MembershipFactory.create(user=member.user)
    other_tenant = RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=elsewhere))
    theirs = RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=outsider))

    call_command("revoke_tokens", "member")

    assert _output(capsys) == "Revoked 3 access token(s) and 2 refresh token(s) of member."
    assert list(AccessToken.objects.all()) == [theirs.access_token]
    assert set(RefreshToken.objects.filter(revoked__isnull=False)) == {refresh, other_tenant}
    events = AuditEvent.objects.filter(action="token.revoked")
    assert events.count() == 5
    assert {e.detail["by"] for e in events} == {"operator-command"}
    assert {e.user for e in events} == {member.user}
    assert f"AccessToken #{unbound.pk}" in {e.target for e in events}


def test_revoke_tokens_for_one_tenant_leaves_the_others(capsys, member):
    here = AccessTokenFactory.create(membership=member)
    elsewhere = AccessTokenFactory.create(membership=MembershipFactory.create(user=member.user))
    call_command("revoke_tokens", "member", "--tenant", member.tenant.slug)
    assert _output(capsys) == "Revoked 1 access token(s) and 0 refresh token(s) of member in acme-test."
    assert not AccessToken.objects.filter(pk=here.pk).exists()
    assert AccessToken.objects.filter(pk=elsewhere.pk).exists()
    assert AuditEvent.objects.get().tenant == member.tenant


def test_revoke_tokens_again_revokes_nothing(capsys, member):
    RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=member))
    call_command("revoke_tokens", "member")
    call_command("revoke_tokens", "member")
    assert _output(capsys).splitlines()[-1] == "Revoked 0 access token(s) and 0 refresh token(s) of member."
    assert AuditEvent.objects.count() == 2


def test_revoke_tokens_refuses_an_unknown_user():
    with pytest.raises(CommandError, match=r"No user 'nobody'\."):
        call_command("revoke_tokens", "nobody")


def test_revoke_tokens_refuses_an_unknown_tenant(member):
    token = AccessTokenFactory.create(membership=member)
    with pytest.raises(CommandError, match=r"No tenant 'nowhere'\."):
        call_command("revoke_tokens", "member", "--tenant", "nowhere")
    assert AccessToken.objects.filter(pk=token.pk).exists()


# purge (sessions: tests/mcp_gateway/test_session_purge.py)


def _aged(days: float) -> AuditEvent:
    return AuditEventFactory.create(created=timezone.now() - timedelta(days=days))


def test_purge_deletes_audit_events_past_retention(capsys, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_RETENTION_DAYS": 30}
    old = [_aged(31), _aged(400)]
    recent = _aged(29)
    call_command("purge")
    assert "Audit events: deleted 2 older than the retention period." in _output(capsys)
    assert list(AuditEvent.objects.all()) == [recent]
    assert not AuditEvent.objects.filter(pk__in=[e.pk for e in old]).exists()


def test_purge_dry_run_counts_audit_events_and_deletes_none(capsys, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_RETENTION_DAYS": 30}
    _aged(31)
    _aged(1)
    call_command("purge", "--dry-run")
    assert "Audit events: would delete 1 older than the retention period." in _output(capsys)
    assert AuditEvent.objects.count() == 2


def test_the_audit_purge_works_through_batches():
    old = [_aged(10) for _ in range(5)]
    kept = _aged(1)
    assert audit_purge(before=timezone.now() - timedelta(days=5), batch_size=2) == len(old)
    assert list(AuditEvent.objects.all()) == [kept]

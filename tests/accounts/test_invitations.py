"""Invitations and member management, in process (``accounts.invitations``): an admin invites an
address (the email read from Django's locmem outbox), inviting it again replaces the link, a
revoked, expired or used link is refused, a link submitted twice at once is accepted once; in a
tenant that requires its provider only someone signed in through it accepts, and the provider's
role stands; an admin changes roles and removes members of their own tenants only, never leaving a
tenant without an admin who can sign in. Every change is an audit row.

The pages: tests/portal/test_members_pages.py; in Chromium: tests/e2e/browser/test_invitation_page.py."""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings
from django.core import mail
from django.db import connection
from django.utils import timezone

from accounts.invitations import selectors, services
from accounts.invitations.emails import EMAIL_NOT_SENT
from accounts.invitations.members import LAST_ADMIN, member_remove, member_role_change
from accounts.invitations.selectors import (
    INVITATION_UNKNOWN,
    MEMBER_NOT_FOUND,
    invitation_get_by_token,
    membership_get_for_admin,
    membership_list_for_admin,
)
from accounts.invitations.services import (
    ALREADY_ACCEPTED,
    ALREADY_MEMBER,
    EMAIL_INVALID,
    EMAIL_INVISIBLE,
    EMAIL_MISMATCH,
    EMAIL_TOO_LONG,
    PROVIDER_FIRST,
    ROLE_UNKNOWN,
    TENANT_NOT_YOURS,
    USERNAME_TAKEN,
    InvitationUnusable,
    invitation_accept,
    invitation_accept_new_account,
    invitation_create,
    invitation_revoke,
)
from accounts.models import ExternalIdentity, IdentityProvider, Invitation, Membership, Role, Tenant, User
from core.errors import InvalidInput, NotFound, PermissionDenied, RateLimited, TooManyOpen, Unavailable
from core.models import AuditAction, AuditEvent
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

ADA = "ada@example.com"
_LINK = re.compile(r"^(https?://\S+/accounts/invitations/([A-Za-z0-9_-]+)/)$", re.MULTILINE)


def _invite(owner: Membership, email: str = ADA, role: str = "contributor") -> str:
    """Invite ``email`` into the owner's tenant; the token of the link."""
    _, token = invitation_create(by=owner.user, tenant=owner.tenant, email=email, role=role)
    return token


def _audited(action: AuditAction) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


@pytest.fixture
def ada() -> User:
    """The invited person, with an account of her own (in no tenant yet)."""
    return UserFactory.create(username="ada", email="Ada@Example.COM")


@pytest.fixture
def provider(tenant) -> IdentityProvider:
    """The owner's tenant signs its people in through its provider only."""
    return IdentityProvider.objects.create(
        tenant=tenant, name="Acme SSO", issuer="https://sso.acme.test", client_id="gatehouse", required=True
    )


# Sending


def test_an_admin_invites_an_address_and_only_the_tokens_hash_is_stored(owner):
    invitation, token = invitation_create(
        by=owner.user, tenant=owner.tenant, email="  Ada@Example.COM ", role="contributor"
    )

    assert invitation.email == ADA
    assert invitation.role == Role.CONTRIBUTOR
    assert invitation.invited_by == owner.user
    assert invitation.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert not Invitation.objects.filter(token_hash=token).exists()
    assert invitation.expires - invitation.created == pytest.approx(
        timedelta(days=7), abs=timedelta(seconds=5)
    )
    [message] = mail.outbox
    assert message.to == [ADA]
    assert message.subject == "Join Acme Test on Gatehouse"
    [(link, linked_token)] = _LINK.findall(str(message.body))
    assert link == f"{settings.PUBLIC_URL}/accounts/invitations/{token}/"
    assert linked_token == token
    assert "as contributor" in str(message.body)
    [sent] = _audited(AuditAction.INVITATION_SENT)
    assert (sent.user, sent.tenant) == (owner.user, owner.tenant)
    assert sent.detail == {"invitation": invitation.pk, "email": ADA, "role": "contributor", "replaces": None}
    assert token not in str(sent.detail)


def test_the_link_lasts_the_configured_number_of_days(owner, settings):
    settings.INVITATION_VALID_DAYS = 2

    invitation, _ = invitation_create(by=owner.user, tenant=owner.tenant, email=ADA, role="viewer")

    assert invitation.expires - invitation.created == pytest.approx(
        timedelta(days=2), abs=timedelta(seconds=5)
    )
    assert "expires in 2 days" in str(mail.outbox[0].body)


def test_inviting_an_address_again_replaces_its_link(owner, ada):
    first = _invite(owner, role="viewer")
    second = _invite(owner, email="ADA@example.com", role="admin")

    assert Invitation.objects.filter(tenant=owner.tenant, revoked_at__isnull=True).count() == 1
    with pytest.raises(InvitationUnusable) as refused:
        invitation_accept(token=first, user=ada)
    assert refused.value.data == {"reason": "revoked"}
    assert invitation_accept(token=second, user=ada).membership.role == Role.ADMIN
    replaced = Invitation.objects.get(token_hash=selectors.token_hash(first))
    assert _audited(AuditAction.INVITATION_SENT)[1].detail["replaces"] == replaced.pk


def test_an_address_that_is_already_a_member_is_refused(owner, member):
    with pytest.raises(InvalidInput) as refused:
        _invite(owner, email=member.user.email.upper())

    assert refused.value.message == ALREADY_MEMBER.format(email=member.user.email, tenant="Acme Test")
    assert mail.outbox == []
    assert not Invitation.objects.exists()


def test_an_address_with_an_account_in_another_tenant_is_invited_like_any_other(owner, outsider):
    _invite(owner, email=outsider.user.email)

    assert [message.to for message in mail.outbox] == [[outsider.user.email]]


def test_a_viewer_cannot_invite(member):
    with pytest.raises(NotFound) as refused:
        _invite(member)
    assert refused.value.message == TENANT_NOT_YOURS


def test_an_admin_cannot_invite_into_another_tenant(owner, outsider):
    with pytest.raises(NotFound):
        invitation_create(by=owner.user, tenant=outsider.tenant, email=ADA, role="viewer")
    assert not Invitation.objects.exists()


@pytest.mark.parametrize(
    ("email", "message"),
    [
        ("", EMAIL_INVALID),
        ("not-an-address", EMAIL_INVALID),
        ("ada@example.com\x00", EMAIL_INVISIBLE.format(code="U+0000")),
        ("ada@exa\u202emple.com", EMAIL_INVISIBLE.format(code="U+202E")),
        ("ada\u200b@example.com", EMAIL_INVISIBLE.format(code="U+200B")),
        ("ada@example.com\ud800", EMAIL_INVISIBLE.format(code="U+D800")),
        ("a" * 250 + "@example.com", EMAIL_TOO_LONG),
        ("ada@example.com\nBcc: eve@example.com", EMAIL_INVISIBLE.format(code="U+000A")),
    ],
    ids=["blank", "no-at", "nul", "bidi", "zero-width", "surrogate", "overlong", "header-injection"],
)
def test_a_hostile_address_is_refused_with_its_reason(owner, email, message):
    with pytest.raises(InvalidInput) as refused:
        _invite(owner, email=email)
    assert refused.value.message == message
    assert mail.outbox == []


@pytest.mark.parametrize("role", ["owner", "admin\x00", "", "ADMIN", "viewer\u200b"])
def test_an_unknown_role_is_refused(owner, role):
    with pytest.raises(InvalidInput) as refused:
        _invite(owner, role=role)
    assert refused.value.message == ROLE_UNKNOWN


def test_a_tenant_with_the_most_open_invitations_refuses_another(owner, monkeypatch):
    monkeypatch.setattr(services, "OPEN_MAX", 2)
    _invite(owner, email="one@example.com")
    _invite(owner, email="two@example.com")

    with pytest.raises(TooManyOpen) as refused:
        _invite(owner, email="three@example.com")

    assert refused.value.http_status == 429
    assert "2 open invitations" in refused.value.message
    # Inviting an open address again replaces its invitation; expired ones no longer count.
    _invite(owner, email="two@example.com")
    Invitation.objects.filter(email="one@example.com").update(expires=timezone.now())
    _invite(owner, email="three@example.com")


def test_an_admin_sends_at_most_so_many_invitations_an_hour(owner, monkeypatch):
    monkeypatch.setattr(services, "SENT_PER_HOUR_MAX", 2)
    _invite(owner, email="one@example.com")
    # Sending a link again counts as sending one.
    _invite(owner, email="one@example.com")

    with pytest.raises(RateLimited) as refused:
        _invite(owner, email="two@example.com")

    assert refused.value.http_status == 429
    assert 0 < refused.value.retry_after_seconds <= 3600
    assert "2 invitations per hour per admin" in refused.value.message
    assert len(mail.outbox) == 2
    Invitation.objects.update(created=timezone.now() - timedelta(hours=1, seconds=1))
    _invite(owner, email="two@example.com")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_mail_server_that_refuses_leaves_the_old_link_working(owner, ada, settings):
    token = _invite(owner)
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", _closed_port(), False

    with pytest.raises(Unavailable) as refused:
        _invite(owner)

    assert refused.value.message == EMAIL_NOT_SENT
    assert Invitation.objects.count() == 1
    assert len(_audited(AuditAction.INVITATION_SENT)) == 1
    assert invitation_accept(token=token, user=ada).joined


# Revoking


def test_revoking_ends_the_link_and_is_audited_once(owner, ada):
    token = _invite(owner)
    invitation = invitation_get_by_token(token=token)

    invitation_revoke(by=owner.user, invitation=invitation)
    invitation_revoke(by=owner.user, invitation=invitation)

    with pytest.raises(InvitationUnusable):
        invitation_accept(token=token, user=ada)
    [revoked] = _audited(AuditAction.INVITATION_REVOKED)
    assert revoked.detail == {"invitation": invitation.pk, "email": ADA, "role": "contributor"}


def test_an_accepted_invitation_cannot_be_revoked(owner, ada):
    token = _invite(owner)
    invitation_accept(token=token, user=ada)

    with pytest.raises(InvalidInput) as refused:
        invitation_revoke(by=owner.user, invitation=invitation_get_by_token(token=token))
    assert refused.value.message == ALREADY_ACCEPTED


def test_another_tenants_admin_cannot_revoke(owner, outsider):
    invitation = invitation_get_by_token(token=_invite(owner))

    with pytest.raises(NotFound):
        invitation_revoke(by=outsider.user, invitation=invitation)
    assert Invitation.objects.get().revoked_at is None


# Accepting


def test_the_invited_person_accepts_with_her_account_and_joins_with_the_role(owner, ada):
    token = _invite(owner, role="contributor")

    accepted = invitation_accept(token=token, user=ada)

    assert accepted.joined
    assert Membership.objects.get(user=ada, tenant=owner.tenant).role == Role.CONTRIBUTOR
    invitation = Invitation.objects.get()
    assert invitation.accepted_by == ada
    assert invitation.accepted_at is not None
    [row] = _audited(AuditAction.INVITATION_ACCEPTED)
    assert (row.user, row.tenant) == (ada, owner.tenant)
    assert row.detail == {
        "invitation": invitation.pk,
        "invitedRole": "contributor",
        "role": "contributor",
        "joined": True,
        "accountCreated": False,
    }


def test_a_used_link_is_refused(owner, ada):
    token = _invite(owner)
    invitation_accept(token=token, user=ada)

    with pytest.raises(InvitationUnusable) as refused:
        invitation_accept(token=token, user=ada)

    assert refused.value.http_status == 410
    assert refused.value.data == {"reason": "used"}
    assert "accepted already" in refused.value.message


def test_an_expired_link_is_refused(owner, ada):
    token = _invite(owner)
    Invitation.objects.update(expires=timezone.now() - timedelta(seconds=1))

    with pytest.raises(InvitationUnusable) as refused:
        invitation_accept(token=token, user=ada)

    assert refused.value.data == {"reason": "expired"}
    assert not Membership.objects.filter(user=ada).exists()


def test_an_account_of_another_address_is_refused_and_the_link_stays_open(owner, outsider):
    token = _invite(owner)

    with pytest.raises(PermissionDenied) as refused:
        invitation_accept(token=token, user=outsider.user)

    assert refused.value.message == EMAIL_MISMATCH.format(email=ADA)
    assert Invitation.objects.get().accepted_at is None
    assert not Membership.objects.filter(user=outsider.user, tenant=owner.tenant).exists()


@pytest.mark.parametrize(
    "token",
    ["", "a" * 42, "a" * 44, "a" * 43, "ä" * 43, "a" * 42 + "\x00", "a/b", "x" * 5000],
    ids=["empty", "short", "long", "unknown", "non-ascii", "nul", "slash", "huge"],
)
def test_a_malformed_or_unknown_token_is_not_found(token, ada):
    with pytest.raises(NotFound) as refused:
        invitation_accept(token=token, user=ada)
    assert refused.value.message == INVITATION_UNKNOWN


def test_a_link_of_a_deactivated_tenant_is_not_found(owner, ada):
    token = _invite(owner)
    Tenant.objects.filter(pk=owner.tenant_id).update(is_active=False)

    with pytest.raises(NotFound):
        invitation_accept(token=token, user=ada)


def test_someone_who_is_a_member_already_keeps_their_role(owner, ada):
    token = _invite(owner, role="admin")
    MembershipFactory.create(user=ada, tenant=owner.tenant, role=Role.VIEWER)

    accepted = invitation_accept(token=token, user=ada)

    assert not accepted.joined
    assert Membership.objects.get(user=ada, tenant=owner.tenant).role == Role.VIEWER


def test_a_new_account_gets_the_invited_address_and_joins(owner):
    token = _invite(owner, role="viewer")
    account = User(username="newcomer", email="forged@example.com")
    account.set_password("a-long-and-unusual-passphrase")

    accepted = invitation_accept_new_account(token=token, account=account)

    user = User.objects.get(username="newcomer")
    assert user.email == ADA
    assert user.check_password("a-long-and-unusual-passphrase")
    assert accepted.membership.user == user
    assert accepted.membership.role == Role.VIEWER
    assert _audited(AuditAction.INVITATION_ACCEPTED)[0].detail["accountCreated"] is True


def test_a_taken_username_is_refused_in_any_letter_case(owner, member):
    token = _invite(owner)

    with pytest.raises(InvalidInput) as refused:
        invitation_accept_new_account(token=token, account=User(username=member.user.username.upper()))

    assert refused.value.message == USERNAME_TAKEN
    assert Invitation.objects.get().accepted_at is None


# A tenant that requires its provider


def test_where_the_provider_is_required_only_someone_signed_in_through_it_accepts(owner, ada, provider):
    token = _invite(owner)

    with pytest.raises(PermissionDenied) as refused:
        invitation_accept(token=token, user=ada)
    assert refused.value.message == PROVIDER_FIRST.format(tenant="Acme Test", provider="Acme SSO")

    ExternalIdentity.objects.create(provider=provider, subject="s-ada", user=ada, email=ADA)
    assert invitation_accept(token=token, user=ada).joined


def test_the_role_the_provider_mapped_at_sign_in_stands(owner, ada, provider):
    token = _invite(owner, role="admin")
    # What signing in through the provider did: linked her, and made her a viewer.
    ExternalIdentity.objects.create(provider=provider, subject="s-ada", user=ada, email=ADA)
    MembershipFactory.create(user=ada, tenant=owner.tenant, role=Role.VIEWER)

    accepted = invitation_accept(token=token, user=ada)

    assert not accepted.joined
    assert accepted.membership.role == Role.VIEWER
    assert _audited(AuditAction.INVITATION_ACCEPTED)[0].detail["invitedRole"] == "admin"


def test_the_address_the_provider_asserted_counts(owner, provider):
    token = _invite(owner)
    linked = UserFactory.create(username="acme.1234", email="")
    ExternalIdentity.objects.create(provider=provider, subject="s-1", user=linked, email=ADA)

    assert invitation_accept(token=token, user=linked).joined


def test_no_new_password_account_joins_where_the_provider_is_required(owner, provider):
    token = _invite(owner)

    with pytest.raises(PermissionDenied):
        invitation_accept_new_account(token=token, account=User(username="newcomer"))

    assert not User.objects.filter(username="newcomer").exists()


# Members


def test_an_admin_changes_a_members_role(owner, member):
    changed = member_role_change(by=owner.user, membership=member, role="contributor")

    assert changed.role == Role.CONTRIBUTOR
    assert Membership.objects.get(pk=member.pk).role == Role.CONTRIBUTOR
    [row] = _audited(AuditAction.MEMBER_ROLE_CHANGED)
    assert (row.user, row.tenant, row.target) == (owner.user, owner.tenant, "member")
    assert row.detail == {"member": member.user_id, "from": "viewer", "to": "contributor"}


def test_the_same_role_again_changes_nothing(owner, member):
    member_role_change(by=owner.user, membership=member, role="viewer")
    assert _audited(AuditAction.MEMBER_ROLE_CHANGED) == []


def test_an_admin_removes_a_member_whose_account_stays(owner, member):
    member_remove(by=owner.user, membership=member)

    assert not Membership.objects.filter(pk=member.pk).exists()
    assert User.objects.filter(pk=member.user_id).exists()
    [row] = _audited(AuditAction.MEMBER_REMOVED)
    assert row.detail == {"member": member.user_id, "role": "viewer"}


@pytest.mark.parametrize(
    "change",
    [
        lambda owner: member_role_change(by=owner.user, membership=owner, role="viewer"),
        lambda owner: member_remove(by=owner.user, membership=owner),
    ],
    ids=["demote", "remove"],
)
def test_the_last_admin_can_neither_demote_nor_remove_themselves(
    owner, change: Callable[[Membership], object]
):
    with pytest.raises(PermissionDenied) as refused:
        change(owner)

    assert refused.value.message == LAST_ADMIN.format(username="owner", tenant="Acme Test")
    assert Membership.objects.get(pk=owner.pk).role == Role.ADMIN


def test_an_admin_steps_down_when_another_admin_can_sign_in(owner, member):
    member_role_change(by=owner.user, membership=member, role="admin")

    member_role_change(by=owner.user, membership=owner, role="viewer")

    with pytest.raises(PermissionDenied):
        member_remove(by=member.user, membership=Membership.objects.get(pk=member.pk))


def test_an_admin_account_nobody_signs_in_as_does_not_count(owner):
    # A service client's account: no usable password and no provider behind it.
    service = UserFactory.create(username="svc-acme")
    service.set_unusable_password()
    service.save()
    MembershipFactory.create(user=service, tenant=owner.tenant, role=Role.ADMIN)
    disabled = MembershipFactory.create(
        user=UserFactory.create(username="gone", is_active=False), tenant=owner.tenant, role=Role.ADMIN
    )

    with pytest.raises(PermissionDenied):
        member_role_change(by=owner.user, membership=owner, role="viewer")
    member_remove(by=owner.user, membership=disabled)
    assert [m.user.username for m in membership_list_for_admin(by=owner.user)] == ["owner"]


def test_another_tenants_member_is_not_found(owner, outsider):
    with pytest.raises(NotFound) as refused:
        membership_get_for_admin(by=owner.user, membership_id=str(outsider.pk))
    assert refused.value.message == MEMBER_NOT_FOUND
    with pytest.raises(NotFound):
        member_remove(by=owner.user, membership=outsider)
    assert Membership.objects.filter(pk=outsider.pk).exists()


@pytest.mark.parametrize("membership_id", ["", "abc", "-1", "1.0", "9" * 40, "1\x00", "\u0661"])
def test_a_member_id_that_is_no_number_is_not_found(owner, membership_id):
    with pytest.raises(NotFound):
        membership_get_for_admin(by=owner.user, membership_id=membership_id)


def test_a_viewer_changes_no_roles(owner, member):
    with pytest.raises(NotFound):
        member_role_change(by=member.user, membership=owner, role="viewer")
    assert Membership.objects.get(pk=owner.pk).role == Role.ADMIN


def test_an_admin_sees_only_the_members_of_their_own_tenants(owner, outsider):
    elsewhere = MembershipFactory.create(tenant=TenantFactory.create(), role=Role.VIEWER)

    shown = {m.pk for m in membership_list_for_admin(by=owner.user)}

    assert owner.pk in shown
    assert outsider.pk not in shown
    assert elsewhere.pk not in shown


# At the same moment


def _at_once(*calls: Callable[[], object]) -> list[object]:
    """Run each call on its own thread and database connection, all released at the same moment;
    what each returned or raised."""
    results: list[object] = []
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], object]) -> None:
        try:
            barrier.wait(5)
            results.append(call())
        except Exception as error:
            results.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return results


@pytest.mark.django_db(transaction=True)
def test_a_link_submitted_twice_at_once_is_accepted_once(owner, ada):
    token = _invite(owner)

    results = _at_once(
        lambda: invitation_accept(token=token, user=ada), lambda: invitation_accept(token=token, user=ada)
    )

    assert sorted(type(result).__name__ for result in results) == ["Accepted", "InvitationUnusable"]
    assert Membership.objects.filter(user=ada, tenant=owner.tenant).count() == 1
    assert len(_audited(AuditAction.INVITATION_ACCEPTED)) == 1


@pytest.mark.django_db(transaction=True)
def test_two_admins_demoting_each_other_at_once_leave_one_admin(owner, member):
    member_role_change(by=owner.user, membership=member, role="admin")
    mine, theirs = Membership.objects.get(pk=owner.pk), Membership.objects.get(pk=member.pk)

    results = _at_once(
        lambda: member_role_change(by=owner.user, membership=theirs, role="viewer"),
        lambda: member_role_change(by=member.user, membership=mine, role="viewer"),
    )

    assert sorted(type(result).__name__ for result in results) == ["Membership", "NotFound"]
    assert Membership.objects.filter(tenant=owner.tenant, role=Role.ADMIN).count() == 1

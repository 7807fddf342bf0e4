"""Invitations: a tenant admin sends one (``invitation_create``), withdraws it
(``invitation_revoke``), and the invited person accepts it, with the account they are signed in
to (``invitation_accept``) or one they create on the way (``invitation_accept_new_account``).

Each change of a tenant's invitations and members holds its tenant's row (``FOR NO KEY UPDATE``,
which rows pointing at the tenant do not wait for), so two admins cannot together pass a limit
or leave the tenant without an admin; acceptance holds the invitation's row, so a link submitted
twice is accepted once. The email is sent inside the transaction: if the mail server refuses, no
invitation is left that nobody received, and the link it replaced keeps working.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.invitations.emails import invitation_email_send
from accounts.invitations.selectors import (
    INVITATION_UNKNOWN,
    TOKEN_PATTERN,
    AcceptanceStep,
    InvitationState,
    identity_provider_required_by,
    invitation_acceptance_step,
    invitation_state,
    token_hash,
)
from accounts.models import IdentityProvider, Invitation, Membership, Role, Tenant, User
from core.audit.trail import audit_record
from core.errors import (
    GatehouseError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    RateLimited,
    TooManyOpen,
)
from core.models import AuditAction
from core.text_safety import text_invisible_character

# The most invitations a tenant may have open (unexpired, neither accepted nor revoked) at once,
# and the most one admin may send in an hour (links sent again to the same address included).
OPEN_MAX = 200
SENT_PER_HOUR_MAX = 100
EMAIL_MAX_LENGTH = 254

EMAIL_INVALID = "Enter the email address to invite, such as ada@example.com."
EMAIL_TOO_LONG = f"An email address has at most {EMAIL_MAX_LENGTH} characters."
EMAIL_INVISIBLE = "The email address contains an invisible or control character ({code}). Type it again."
ROLE_UNKNOWN = "The role must be one of: admin, contributor, viewer."
TENANT_NOT_YOURS = "That tenant is not one where you are an admin."
ALREADY_MEMBER = "{email} is already a member of {tenant}."
TOO_MANY_OPEN = (
    "{tenant} has {limit} open invitations, the most it may have: revoke some, or wait until they "
    "are accepted or expire."
)
ALREADY_ACCEPTED = "This invitation was accepted already; remove the member instead."
INVITATION_EXPIRED = "This invitation expired on {date} UTC. Ask an admin of {tenant} to invite you again."
INVITATION_USED = (
    "This invitation was accepted already: each link works once. Ask an admin of {tenant} if you need a "
    "new one."
)
INVITATION_REVOKED = (
    "This invitation was withdrawn (revoked, or replaced by a newer link). Ask an admin of {tenant} "
    "to invite you again."
)
EMAIL_MISMATCH = (
    "This invitation is for {email}, and the account you are signed in to has another address. "
    "Sign out, then sign in with the account of {email}, or create one from this link."
)
PROVIDER_FIRST = "{tenant} signs its people in through {provider}: continue with {provider} to accept."
USERNAME_TAKEN = "That username is taken; choose another."


class InvitationUnusable(GatehouseError):
    """A real invitation that can no longer be used: expired, accepted already, or withdrawn."""

    jsonrpc_code = -32002
    http_status = 410
    api_code = "gone"


@dataclass(frozen=True)
class Accepted:
    membership: Membership
    joined: bool  # False: the person was a member already, and keeps their role


def invitation_email_clean(*, email: object) -> str:
    if not isinstance(email, str) or not email.strip():
        raise InvalidInput(EMAIL_INVALID, data={"field": "email"})
    email = email.strip()
    code = text_invisible_character(email)
    if code is not None:
        raise InvalidInput(EMAIL_INVISIBLE.format(code=code), data={"field": "email"})
    if len(email) > EMAIL_MAX_LENGTH:
        raise InvalidInput(EMAIL_TOO_LONG, data={"field": "email"})
    try:
        validate_email(email)
    except ValidationError:
        raise InvalidInput(EMAIL_INVALID, data={"field": "email"}) from None
    return email.lower()


def invitation_role_clean(*, role: object) -> Role:
    if not isinstance(role, str) or role not in Role.values:
        raise InvalidInput(ROLE_UNKNOWN, data={"field": "role"})
    return Role(role)


def tenant_lock_for_admin(*, by: User, tenant: Tenant) -> Tenant:
    """``tenant``, its row held to the end of the transaction, if ``by`` is one of its admins now."""
    locked = Tenant.objects.select_for_update(no_key=True).filter(pk=tenant.pk, is_active=True).first()
    if locked is None or not Membership.objects.filter(user=by, tenant=locked, role=Role.ADMIN).exists():
        raise NotFound(TENANT_NOT_YOURS)
    return locked


def _sent_recently_check(*, by: User, now: datetime) -> None:
    hour = timedelta(hours=1)
    recent = list(
        Invitation.objects.filter(invited_by=by, created__gt=now - hour)
        .order_by("created")
        .values_list("created", flat=True)[:SENT_PER_HOUR_MAX]
    )
    if len(recent) >= SENT_PER_HOUR_MAX:
        # The earliest of them leaves the hour first, and lets the next one in.
        retry_after = max(1, math.ceil((recent[0] + hour - now).total_seconds()))
        limit = f"{SENT_PER_HOUR_MAX} invitations per hour per admin"
        raise RateLimited(limit=limit, retry_after_seconds=retry_after)


def invitation_create(*, by: User, tenant: Tenant, email: str, role: str) -> tuple[Invitation, str]:
    """Invite ``email`` into ``tenant`` with ``role`` and email them the link; the invitation and
    the link's token (which is stored only hashed). An open invitation of the same address is
    revoked: its link stops working."""
    email = invitation_email_clean(email=email)
    checked_role = invitation_role_clean(role=role)
    with transaction.atomic():
        tenant = tenant_lock_for_admin(by=by, tenant=tenant)
        if Membership.objects.filter(tenant=tenant, user__email__iexact=email).exists():
            already = ALREADY_MEMBER.format(email=email, tenant=tenant.name)
            raise InvalidInput(already, data={"field": "email"})
        now = timezone.now()
        still_open = Invitation.objects.filter(
            tenant=tenant, accepted_at__isnull=True, revoked_at__isnull=True
        )
        replaced = still_open.filter(email=email).first()
        if still_open.filter(expires__gt=now).exclude(email=email).count() >= OPEN_MAX:
            raise TooManyOpen(
                TOO_MANY_OPEN.format(tenant=tenant.name, limit=OPEN_MAX), reason="invitations", limit=OPEN_MAX
            )
        _sent_recently_check(by=by, now=now)
        if replaced is not None:
            replaced.revoked_at = now
            replaced.save(update_fields=["revoked_at"])
        token = secrets.token_urlsafe(32)
        invitation = Invitation.objects.create(
            tenant=tenant,
            email=email,
            role=checked_role,
            invited_by=by,
            token_hash=token_hash(token),
            expires=now + timedelta(days=settings.INVITATION_VALID_DAYS),
        )
        provider = identity_provider_required_by(tenant=tenant)
        invitation_email_send(invitation=invitation, token=token, by=by, provider=provider)
        audit_record(
            action=AuditAction.INVITATION_SENT,
            user=by,
            tenant=tenant,
            target=email,
            detail={
                "invitation": invitation.pk,
                "email": email,
                "role": checked_role.value,
                "replaces": replaced.pk if replaced is not None else None,
            },
        )
    return invitation, token


def invitation_revoke(*, by: User, invitation: Invitation) -> Invitation:
    """Withdraw an invitation: its link stops working. Safe to call twice."""
    with transaction.atomic():
        tenant_lock_for_admin(by=by, tenant=invitation.tenant)
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if locked.accepted_at is not None:
            raise InvalidInput(ALREADY_ACCEPTED)
        if locked.revoked_at is not None:
            return locked
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
        audit_record(
            action=AuditAction.INVITATION_REVOKED,
            user=by,
            tenant=invitation.tenant,
            target=locked.email,
            detail={"invitation": locked.pk, "email": locked.email, "role": locked.role},
        )
    return locked


def invitation_unusable_reason(*, invitation: Invitation) -> InvitationUnusable | None:
    """Why the invitation cannot be accepted now, or None if it can."""
    state = invitation_state(invitation=invitation, now=timezone.now())
    tenant = invitation.tenant.name
    if state is InvitationState.ACCEPTED:
        return InvitationUnusable(INVITATION_USED.format(tenant=tenant), data={"reason": "used"})
    if state is InvitationState.REVOKED:
        return InvitationUnusable(INVITATION_REVOKED.format(tenant=tenant), data={"reason": "revoked"})
    if state is InvitationState.EXPIRED:
        date = f"{invitation.expires:%Y-%m-%d %H:%M}"
        return InvitationUnusable(
            INVITATION_EXPIRED.format(date=date, tenant=tenant), data={"reason": "expired"}
        )
    return None


def _locked_usable(token: str) -> Invitation:
    """The invitation of ``token``, its row held to the end of the transaction, if it can still
    be accepted; ``NotFound`` or ``InvitationUnusable`` otherwise."""
    found = (
        Invitation.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .filter(token_hash=token_hash(token), tenant__is_active=True)
        .first()
        if TOKEN_PATTERN.fullmatch(token)
        else None
    )
    if found is None:
        raise NotFound(INVITATION_UNKNOWN)
    refusal = invitation_unusable_reason(invitation=found)
    if refusal is not None:
        raise refusal
    return found


def _accepted(*, invitation: Invitation, user: User, created_account: bool) -> Accepted:
    membership, joined = Membership.objects.get_or_create(
        user=user, tenant=invitation.tenant, defaults={"role": invitation.role}
    )
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    audit_record(
        action=AuditAction.INVITATION_ACCEPTED,
        user=user,
        tenant=invitation.tenant,
        target=invitation.email,
        detail={
            "invitation": invitation.pk,
            "invitedRole": invitation.role,
            "role": membership.role,
            "joined": joined,
            "accountCreated": created_account,
        },
    )
    return Accepted(membership=membership, joined=joined)


def _provider_refusal(provider: IdentityProvider) -> PermissionDenied:
    return PermissionDenied(
        PROVIDER_FIRST.format(tenant=provider.tenant.name, provider=provider.name),
        data={"reason": "provider_required"},
    )


def invitation_accept(*, token: str, user: User) -> Accepted:
    """Accept the invitation for ``user``'s account, if ``invitation_acceptance_step`` lets them
    (the invited address; through the provider where the tenant requires it). A member already
    keeps their role."""
    with transaction.atomic():
        invitation = _locked_usable(token)
        provider = identity_provider_required_by(tenant=invitation.tenant)
        step = invitation_acceptance_step(invitation=invitation, user=user, provider=provider)
        if step is AcceptanceStep.PROVIDER and provider is not None:
            raise _provider_refusal(provider)
        if step is not AcceptanceStep.ACCEPT:
            raise PermissionDenied(EMAIL_MISMATCH.format(email=invitation.email), data={"reason": "email"})
        return _accepted(invitation=invitation, user=user, created_account=False)


def invitation_accept_new_account(*, token: str, account: User) -> Accepted:
    """Save ``account`` (unsaved: a username and a password its form checked against the password
    validators) with the invited address, and accept the invitation for it."""
    with transaction.atomic():
        invitation = _locked_usable(token)
        provider = identity_provider_required_by(tenant=invitation.tenant)
        if provider is not None:
            raise _provider_refusal(provider)
        account.email = invitation.email
        if User.objects.filter(username__iexact=account.username).exists():
            raise InvalidInput(USERNAME_TAKEN, data={"field": "username"})
        try:
            with transaction.atomic():
                account.save()
        except IntegrityError:
            # Taken by another request between the check and the save.
            raise InvalidInput(USERNAME_TAKEN, data={"field": "username"}) from None
        return _accepted(invitation=invitation, user=account, created_account=True)

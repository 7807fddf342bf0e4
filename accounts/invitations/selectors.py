"""What the members page and the invitation page read.

A tenant admin's members and invitations are found only in the active tenants where the caller is
an admin: another tenant's, or one that does not exist, is the same ``NotFound``. An invitation is
found by its link's token through the token's hash, the only form stored.

Service clients' accounts (``oauth.service_clients``) are members too, but nobody signs in as one:
they have no usable password and no identity provider behind them. The members page lists people
only, and the rule that a tenant keeps an admin counts only admins who can sign in.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from enum import StrEnum

from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
from django.db.models import Exists, OuterRef, Q, QuerySet

from accounts.models import ExternalIdentity, IdentityProvider, Invitation, Membership, Role, Tenant, User
from accounts.selectors import tenant_list_administered
from core.errors import NotFound

# secrets.token_urlsafe(32): 43 characters of the URL-safe base64 alphabet.
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{43}")
# A primary key as a form sends it: digits, and few enough to fit PostgreSQL's bigint.
_ID_PATTERN = re.compile(r"[0-9]{1,18}")

INVITATION_UNKNOWN = (
    "This invitation link is not one Gatehouse sent, or it was not copied whole. Open the link from "
    "the email again, or ask the tenant's admin for a new invitation."
)
MEMBER_NOT_FOUND = "No such member in a tenant where you are an admin."
INVITATION_NOT_FOUND = "No such invitation in a tenant where you are an admin."


class InvitationState(StrEnum):
    OPEN = "open"
    EXPIRED = "expired"
    ACCEPTED = "accepted"
    REVOKED = "revoked"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _signs_in() -> Q:
    """Memberships of people: an account with a usable password, or linked to a provider."""
    linked = Exists(ExternalIdentity.objects.filter(user=OuterRef("user")))
    return ~Q(user__password__startswith=UNUSABLE_PASSWORD_PREFIX) | Q(linked)


def _pk(value: str) -> int | None:
    return int(value) if _ID_PATTERN.fullmatch(value) else None


def membership_list_for_admin(*, by: User) -> QuerySet[Membership]:
    """The people of every tenant where ``by`` is an admin, by tenant and username."""
    return (
        Membership.objects.filter(_signs_in(), tenant__in=tenant_list_administered(user=by))
        .select_related("user", "tenant")
        .order_by("tenant__name", "user__username")
    )


def membership_get_for_admin(*, by: User, membership_id: str) -> Membership:
    """A person's membership in a tenant where ``by`` is an admin; ``NotFound`` otherwise."""
    pk = _pk(membership_id)
    found = membership_list_for_admin(by=by).filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise NotFound(MEMBER_NOT_FOUND)
    return found


def admin_count_who_can_sign_in(*, tenant: Tenant, excluding: Membership | None = None) -> int:
    admins = Membership.objects.filter(_signs_in(), tenant=tenant, role=Role.ADMIN, user__is_active=True)
    if excluding is not None:
        admins = admins.exclude(pk=excluding.pk)
    return admins.count()


def invitation_list_open_for_admin(*, by: User) -> QuerySet[Invitation]:
    """Invitations neither accepted nor revoked (expired ones included, for the admin to see) of
    every tenant where ``by`` is an admin, newest first."""
    return (
        Invitation.objects.filter(
            tenant__in=tenant_list_administered(user=by), accepted_at__isnull=True, revoked_at__isnull=True
        )
        .select_related("tenant", "invited_by")
        .order_by("tenant__name", "-created")
    )


def invitation_get_for_admin(*, by: User, invitation_id: str) -> Invitation:
    """An open invitation of a tenant where ``by`` is an admin; ``NotFound`` otherwise."""
    pk = _pk(invitation_id)
    found = invitation_list_open_for_admin(by=by).filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise NotFound(INVITATION_NOT_FOUND)
    return found


def invitation_get_by_token(*, token: str) -> Invitation:
    """The invitation of an active tenant whose link carries ``token``, in whatever state it is;
    ``NotFound`` for anything else, malformed tokens included (never looked up)."""
    found = (
        Invitation.objects.select_related("tenant", "invited_by")
        .filter(token_hash=token_hash(token), tenant__is_active=True)
        .first()
        if TOKEN_PATTERN.fullmatch(token)
        else None
    )
    if found is None:
        raise NotFound(INVITATION_UNKNOWN)
    return found


def invitation_state(*, invitation: Invitation, now: datetime) -> InvitationState:
    if invitation.accepted_at is not None:
        return InvitationState.ACCEPTED
    if invitation.revoked_at is not None:
        return InvitationState.REVOKED
    if invitation.expires <= now:
        return InvitationState.EXPIRED
    return InvitationState.OPEN


def identity_provider_required_by(*, tenant: Tenant) -> IdentityProvider | None:
    """The tenant's enabled provider if the tenant requires its people to sign in through it."""
    return IdentityProvider.objects.filter(tenant=tenant, required=True, enabled=True).first()


def external_identity_get(*, user: User, provider: IdentityProvider) -> ExternalIdentity | None:
    """How ``user`` is known to ``provider``, if they have signed in through it."""
    return ExternalIdentity.objects.filter(user=user, provider=provider).first()


class AcceptanceStep(StrEnum):
    """What stands between a visitor of an open invitation's link and accepting it."""

    ACCEPT = "accept"  # nothing: the signed-in person may accept
    PROVIDER = "provider"  # sign in through the tenant's provider first
    OTHER_ACCOUNT = "other_account"  # signed in to an account of another address
    SIGN_IN = "sign_in"  # nobody signed in: sign in, or create an account


def invitation_acceptance_step(
    *, invitation: Invitation, user: User | None, provider: IdentityProvider | None
) -> AcceptanceStep:
    """The one rule of who may accept: the account's address (or, in a tenant that requires its
    provider, the address that provider asserted) is the invited one, in any letter case; in such
    a tenant, only someone who signed in through the provider."""
    if user is None:
        return AcceptanceStep.PROVIDER if provider is not None else AcceptanceStep.SIGN_IN
    addresses = {user.email.lower()}
    if provider is not None:
        identity = external_identity_get(user=user, provider=provider)
        if identity is None:
            return AcceptanceStep.PROVIDER
        addresses.add(identity.email.lower())
    return AcceptanceStep.ACCEPT if invitation.email in addresses else AcceptanceStep.OTHER_ACCOUNT

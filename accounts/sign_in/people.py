"""Who signs in through a tenant's provider, and with which role.

A person is known by the provider's subject (``ExternalIdentity``), never by an email alone: an
email is only a name a provider asserts. On a first sign-in the subject is linked to an existing
account only when nothing else could own it: the provider says the email is verified, its domain
is one the provider serves, exactly one account has it, that account is linked to no other
subject of this provider, and it belongs to no other tenant (a provider of one tenant must never
reach into another's accounts). Otherwise a new account is made, with no usable password.

The role is mapped anew at each sign-in (``roles``): a changed group changes the role; no mapped
role removes the person from the tenant and refuses the sign-in. Sign-ins of one provider are
serialised on its row, so two first sign-ins of one subject make one account.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import ExternalIdentity, IdentityProvider, Membership, Role, Tenant, User
from accounts.services import membership_set
from accounts.sign_in.roles import role_from_claims
from core.errors import PermissionDenied
from core.text_safety import text_cleaned, text_unstorable_reason

NO_SUBJECT = "The identity provider's answer names nobody (no usable subject)."
NO_ROLE = (
    "Your account at {provider} gives you no role in {tenant}. Ask your administrator to add you "
    "to a group Gatehouse maps to a role."
)
ACCOUNT_DISABLED = "This Gatehouse account is disabled. Ask an administrator of {tenant}."
PROVIDER_OFF = "Sign-in through this identity provider is switched off."
SUBJECT_MAX_CHARS = 255
NAME_MAX_CHARS = 150


@dataclass(frozen=True)
class SignedIn:
    user: User
    tenant: Tenant
    role: Role
    created: bool
    role_before: str | None


def person_sign_in(*, provider_id: int, claims: Mapping[str, Any]) -> SignedIn:
    """The account ``claims`` (the provider's checked ID token) stand for, a member of the
    provider's tenant with the mapped role; ``PermissionDenied`` saying why not."""
    subject = claims.get("sub")
    if (
        not isinstance(subject, str)
        or not subject
        or len(subject) > SUBJECT_MAX_CHARS
        or text_unstorable_reason(subject) is not None
    ):
        raise PermissionDenied(NO_SUBJECT, data={"reason": "no_subject"})
    with transaction.atomic():
        provider = (
            IdentityProvider.objects.select_for_update()
            .select_related("tenant")
            .filter(pk=provider_id)
            .first()
        )
        if provider is None or not provider.enabled or not provider.tenant.is_active:
            raise PermissionDenied(PROVIDER_OFF, data={"reason": "provider_off"})
        tenant = provider.tenant
        role = role_from_claims(
            claims=claims,
            claim=provider.role_claim,
            role_map=provider.role_map,
            default_role=provider.default_role,
        )
        email = _verified_email(claims, provider) or ""
        known = ExternalIdentity.objects.select_related("user")
        identity = known.filter(provider=provider, subject=subject).first()
        created = False
        if identity is None:
            user = _linkable(email, provider)
            if user is None:
                user = _new_user(subject=subject, email=email, claims=claims, provider=provider)
                created = True
            identity = ExternalIdentity.objects.create(provider=provider, subject=subject, user=user)
        user = identity.user
        if not user.is_active:
            raise PermissionDenied(ACCOUNT_DISABLED.format(tenant=tenant.name), data={"reason": "disabled"})
        before = Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True).first()
        if role is None:
            # Committed, then refused: the removal stands.
            Membership.objects.filter(user=user, tenant=tenant).delete()
        else:
            membership_set(user=user, tenant=tenant, role=role)
            identity.email = email
            identity.last_signed_in = timezone.now()
            identity.save(update_fields=["email", "last_signed_in"])
    if role is None:
        raise PermissionDenied(
            NO_ROLE.format(provider=provider.name, tenant=tenant.name),
            data={"reason": "no_role", "user": user.pk, "removed": before is not None},
        )
    return SignedIn(user=user, tenant=tenant, role=role, created=created, role_before=before)


def _verified_email(claims: Mapping[str, Any], provider: IdentityProvider) -> str | None:
    email = claims.get("email")
    if claims.get("email_verified") is not True or not isinstance(email, str):
        return None
    email = email.strip().lower()
    local, at, domain = email.rpartition("@")
    if not at or not local or len(email) > 254 or text_unstorable_reason(email) is not None:
        return None
    return email if domain in provider.email_domains else None


def _linkable(email: str, provider: IdentityProvider) -> User | None:
    """The existing account a verified email of the provider's domains may be linked to, if only
    one could be meant (module docstring)."""
    if not email:
        return None
    candidates = list(User.objects.filter(email__iexact=email)[:2])
    if len(candidates) != 1:
        return None
    user = candidates[0]
    if ExternalIdentity.objects.filter(provider=provider, user=user).exists():
        return None
    if Membership.objects.filter(user=user).exclude(tenant=provider.tenant).exists():
        return None
    return user


def _new_user(*, subject: str, email: str, claims: Mapping[str, Any], provider: IdentityProvider) -> User:
    # The username is a label: the verified email when free, else one made from the subject.
    digest = hashlib.sha256(f"{provider.pk}:{subject}".encode()).hexdigest()[:12]
    username = email if email and not User.objects.filter(username__iexact=email).exists() else ""
    username = username or f"{provider.tenant.slug}.{digest}"
    name = claims.get("name")
    display_name = text_cleaned(name)[:NAME_MAX_CHARS] if isinstance(name, str) else ""
    user = User(username=username[:150], email=email, display_name=display_name)
    user.set_unusable_password()
    user.save()
    return user

from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import IdentityProvider, Membership, Role, Tenant, User
from core.errors import NotFound
from core.text_safety import text_is_storable


def membership_list_for_user(*, user: User) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(user=user, tenant__is_active=True)
        .select_related("tenant")
        .order_by("tenant__name")
    )


def tenant_list_administered(*, user: User) -> QuerySet[Tenant]:
    """The active tenants where ``user`` is an admin, by name."""
    return Tenant.objects.filter(
        is_active=True, memberships__user=user, memberships__role=Role.ADMIN
    ).order_by("name")


def membership_get(*, user: User, tenant: Tenant) -> Membership | None:
    return Membership.objects.filter(user=user, tenant=tenant, tenant__is_active=True).first()


NO_TENANT = "No tenant {slug!r}."
NO_USER = "No user {username!r}."
NO_PROVIDER = "No organisation {slug!r} signs in through an identity provider here."


def tenant_get(*, slug: str) -> Tenant:
    # A NUL or lone surrogate cannot be stored, so no such row exists; asking PostgreSQL would fail.
    tenant = Tenant.objects.filter(slug=slug).first() if text_is_storable(slug) else None
    if tenant is None:
        raise NotFound(NO_TENANT.format(slug=slug))
    return tenant


def user_get(*, username: str) -> User:
    user = User.objects.filter(username=username).first() if text_is_storable(username) else None
    if user is None:
        raise NotFound(NO_USER.format(username=username))
    return user


def identity_provider_for_email(*, email: str) -> IdentityProvider | None:
    """The enabled provider of an active tenant that serves ``email``'s domain, if one does."""
    _, at, domain = email.strip().lower().rpartition("@")
    if not at or not domain or not text_is_storable(domain) or len(domain) > 253:
        return None
    # A handful of rows, one a tenant at most; SQLite has no JSON containment lookup.
    enabled = IdentityProvider.objects.select_related("tenant").filter(enabled=True, tenant__is_active=True)
    return next((p for p in enabled.order_by("tenant__slug") if domain in p.email_domains), None)


def identity_provider_for_tenant(*, slug: str) -> IdentityProvider:
    """The enabled provider of the active tenant ``slug``; ``NotFound`` otherwise."""
    found = (
        IdentityProvider.objects.select_related("tenant")
        .filter(enabled=True, tenant__is_active=True, tenant__slug=slug)
        .first()
        if text_is_storable(slug)
        else None
    )
    if found is None:
        raise NotFound(NO_PROVIDER.format(slug=slug))
    return found


def identity_provider_required_for(*, user: User) -> IdentityProvider | None:
    """A provider ``user`` must sign in through (a tenant of theirs requires its own), if any."""
    return (
        IdentityProvider.objects.select_related("tenant")
        .filter(required=True, enabled=True, tenant__is_active=True, tenant__memberships__user=user)
        .order_by("tenant__slug")
        .first()
    )

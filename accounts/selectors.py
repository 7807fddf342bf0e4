from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import Membership, Role, Tenant, User
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

from __future__ import annotations

from django.db.models import QuerySet

from accounts.models import Membership, Tenant, User


def membership_list_for_user(*, user: User) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(user=user, tenant__is_active=True)
        .select_related("tenant")
        .order_by("tenant__name")
    )


def membership_get(*, user: User, tenant: Tenant) -> Membership | None:
    return Membership.objects.filter(user=user, tenant=tenant, tenant__is_active=True).first()

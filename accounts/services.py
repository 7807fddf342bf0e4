from __future__ import annotations

from django.db import transaction

from accounts.models import Membership, Role, Tenant, User


def tenant_ensure(*, slug: str, name: str) -> Tenant:
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    return tenant


def user_ensure(*, username: str, password: str, email: str = "") -> User:
    """Create the user, or leave an existing one (and its password) exactly as it is."""
    user = User.objects.filter(username=username).first()
    if user is not None:
        return user
    user = User(username=username, email=email)
    user.set_password(password)
    user.save()
    return user


@transaction.atomic
def membership_ensure(*, user: User, tenant: Tenant, role: Role) -> Membership:
    membership, _ = Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": role})
    return membership


DISPLAY_NAME_MAX = 150


def user_set_display_name(*, user_id: int, display_name: str) -> User:
    user = User.objects.get(pk=user_id)
    user.display_name = display_name
    user.save(update_fields=["display_name"])
    return user

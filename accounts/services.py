from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.models import Membership, Role, Tenant, User
from core.errors import InvalidInput


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


def tenant_create(*, slug: str, name: str) -> tuple[Tenant, bool]:
    """Create the tenant, or find the one with this slug (left as it is). Returns (tenant, created)."""
    # The model's own fields validate, so a slug is refused here exactly as the admin refuses it.
    try:
        Tenant._meta.get_field("slug").clean(slug, None)
        Tenant._meta.get_field("name").clean(name, None)
    except ValidationError as exc:
        raise InvalidInput(" ".join(exc.messages)) from exc
    return Tenant.objects.get_or_create(slug=slug, defaults={"name": name})


@transaction.atomic
def membership_ensure(*, user: User, tenant: Tenant, role: Role) -> Membership:
    membership, _ = Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": role})
    return membership


def membership_set(*, user: User, tenant: Tenant, role: Role) -> tuple[Membership, bool]:
    """Give the user this role in the tenant, joining it if need be. Returns (membership, created)."""
    return Membership.objects.update_or_create(user=user, tenant=tenant, defaults={"role": role})


DISPLAY_NAME_MAX = 150


def user_set_display_name(*, user_id: int, display_name: str) -> User:
    user = User.objects.get(pk=user_id)
    user.display_name = display_name
    user.save(update_fields=["display_name"])
    return user

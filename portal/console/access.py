"""Whose console a request may see, and whether it may change it."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import HttpRequest

from accounts.models import Membership, Role, Tenant, User
from accounts.selectors import membership_list_for_user
from core.errors import NotFound, PermissionDenied
from core.text_safety import text_is_storable

NO_CONSOLE = "No tenant {slug!r} of yours."
READ_ONLY = "Only the tenant's admins change this; your role here is {role}."


@dataclass(frozen=True)
class ConsoleTenant:
    """The tenant a console page shows, the person's role in it, and their other tenants."""

    tenant: Tenant
    person: User
    role: str
    tenants: list[Tenant] = field(default_factory=list)

    @property
    def can_change(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def read_only_reason(self) -> str:
        return "" if self.can_change else READ_ONLY.format(role=self.role)

    def require_admin(self) -> None:
        """Refuse a change by anyone but the tenant's admins (a form a viewer never saw)."""
        if not self.can_change:
            raise PermissionDenied(self.read_only_reason)


def console_tenant(*, request: HttpRequest, slug: str) -> ConsoleTenant:
    """The signed-in person's tenant ``slug``; ``NotFound`` for any tenant they are not in."""
    person = request.user
    if not isinstance(person, User) or not text_is_storable(slug):
        raise NotFound(NO_CONSOLE.format(slug=slug[:100]))
    memberships: list[Membership] = list(membership_list_for_user(user=person))
    mine = next((m for m in memberships if m.tenant.slug == slug), None)
    if mine is None:
        raise NotFound(NO_CONSOLE.format(slug=slug[:100]))
    return ConsoleTenant(
        tenant=mine.tenant, person=person, role=mine.role, tenants=[m.tenant for m in memberships]
    )


def console_first_tenant(*, person: User) -> Tenant | None:
    membership = membership_list_for_user(user=person).first()
    return membership.tenant if membership else None

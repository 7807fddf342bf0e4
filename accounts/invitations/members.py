"""A tenant admin changes a member's role or removes them, in their own tenants only.

A tenant always keeps an admin who can sign in: the last one can be neither demoted nor removed,
by themselves or anyone else. Both changes hold the tenant's row (as invitations do), so two
admins demoting each other at once leave one of them an admin. A change takes effect at once:
every token of the member in the tenant is checked against the membership on each use
(``oauth.bearer``), so a removed member's next call is refused and a demoted one's keeps only
what the new role allows.
"""

from __future__ import annotations

from django.db import transaction

from accounts.invitations.selectors import MEMBER_NOT_FOUND, admin_count_who_can_sign_in
from accounts.invitations.services import invitation_role_clean, tenant_lock_for_admin
from accounts.models import Membership, Role, User
from core.audit.trail import audit_record
from core.errors import NotFound, PermissionDenied
from core.models import AuditAction

LAST_ADMIN = (
    "{username} is the last admin of {tenant} who can sign in: make someone else an admin first, "
    "so the tenant is never left without one."
)


def _locked(*, by: User, membership: Membership) -> Membership:
    tenant_lock_for_admin(by=by, tenant=membership.tenant)
    locked = (
        Membership.objects.select_for_update(of=("self",))
        .select_related("user", "tenant")
        .filter(pk=membership.pk, tenant=membership.tenant)
        .first()
    )
    if locked is None:
        raise NotFound(MEMBER_NOT_FOUND)
    return locked


def _last_admin_check(membership: Membership) -> None:
    if (
        membership.role == Role.ADMIN
        and admin_count_who_can_sign_in(tenant=membership.tenant, excluding=membership) == 0
    ):
        raise PermissionDenied(
            LAST_ADMIN.format(username=membership.user.get_username(), tenant=membership.tenant.name),
            data={"reason": "last_admin"},
        )


def member_role_change(*, by: User, membership: Membership, role: str) -> Membership:
    """Give the member ``role`` in their tenant; the same role again changes nothing."""
    new_role = invitation_role_clean(role=role)
    with transaction.atomic():
        locked = _locked(by=by, membership=membership)
        before = locked.role
        if before == new_role:
            return locked
        if new_role != Role.ADMIN:
            _last_admin_check(locked)
        locked.role = new_role
        locked.save(update_fields=["role"])
        audit_record(
            action=AuditAction.MEMBER_ROLE_CHANGED,
            user=by,
            tenant=locked.tenant,
            target=locked.user.get_username(),
            detail={"member": locked.user_id, "from": before, "to": new_role.value},
        )
    return locked


def member_remove(*, by: User, membership: Membership) -> None:
    """Take the member out of their tenant (their account stays, with its other tenants)."""
    with transaction.atomic():
        locked = _locked(by=by, membership=membership)
        _last_admin_check(locked)
        locked.delete()
        audit_record(
            action=AuditAction.MEMBER_REMOVED,
            user=by,
            tenant=locked.tenant,
            target=locked.user.get_username(),
            detail={"member": locked.user_id, "role": locked.role},
        )

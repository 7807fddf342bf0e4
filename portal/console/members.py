"""The console's members section, ``/console/<tenant>/members/``: the tenant's members with their
roles and its open invitations. Its admins invite someone by email, withdraw an invitation, change
a member's role and remove a member (after a confirmation step); everyone else sees the lists.

Thin: each form is handed to one service of ``accounts.invitations``, which checks the caller is an
admin of the tenant, holds the tenant's row and writes the audit row; it also refuses to leave the
tenant without an admin who can sign in. A member or invitation is looked up among the console
tenant's own, so another tenant's id is not found (404), exactly as one that does not exist.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import URLPattern, path
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounts.invitations.members import member_remove, member_role_change
from accounts.invitations.selectors import (
    INVITATION_NOT_FOUND,
    MEMBER_NOT_FOUND,
    invitation_get_for_admin,
    membership_get_for_admin,
    membership_list_for_admin,
)
from accounts.invitations.services import EMAIL_MAX_LENGTH, invitation_create, invitation_revoke
from accounts.models import Invitation, Membership, Role
from accounts.selectors import membership_get
from core.errors import GatehouseError, NotFound
from core.text_safety import text_cleaned
from portal.console.access import ConsoleTenant
from portal.console.changes import console_change, refused_page
from portal.console.pages import console_page, console_render

TEMPLATE = "console/members.html"
INVITATION_SENT = "An invitation was sent to {email}; its link works for {days} day{plural}."
INVITATION_CANCELLED = "The invitation of {email} was withdrawn; its link no longer works."
ROLE_CHANGED = "{username} is now {role} in {tenant}."
ROLE_UNCHANGED = "{username} was already {role} in {tenant}."
MEMBER_REMOVED = "{username} was removed from {tenant}."


@require_GET
@console_page
def members(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    """The section; ``?remove=<member id>`` asks the admin to confirm that removal."""
    confirm = None
    if "remove" in request.GET:
        console.require_admin()
        confirm = _membership(console, str(request.GET["remove"]))
    return _page(request, console, confirm=confirm)


def _page(
    request: HttpRequest,
    console: ConsoleTenant,
    *,
    error: str = "",
    status: int = 200,
    form: dict[str, str] | None = None,
    confirm: Membership | None = None,
) -> HttpResponse:
    people = (
        Membership.objects.filter(tenant=console.tenant).select_related("user").order_by("user__username")
    )
    context: dict[str, Any] = {
        "members": people,
        # The accounts a person signs in as (not service clients' accounts): those an admin may
        # change here. Asked of the services' own selector, so the page offers what they accept.
        "people": set(_admin_people(console).values_list("pk", flat=True)) if console.can_change else set(),
        "invitations": (
            Invitation.objects.filter(
                tenant=console.tenant, accepted_at__isnull=True, revoked_at__isnull=True
            )
            .select_related("invited_by")
            .order_by("-created")
        ),
        "now": timezone.now(),
        "roles": Role.choices,
        "error": error,
        "form": form or {"role": Role.VIEWER.value},
        "email_max_length": EMAIL_MAX_LENGTH,
        "confirm": confirm,
    }
    return console_render(request, console, TEMPLATE, context, status=status)


def _admin_people(console: ConsoleTenant) -> QuerySet[Membership]:
    return membership_list_for_admin(by=console.person).filter(tenant=console.tenant)


def _membership(console: ConsoleTenant, membership_id: str) -> Membership:
    """A person's membership in this console's tenant; ``NotFound`` for any other id."""
    found = membership_get_for_admin(by=console.person, membership_id=membership_id)
    if found.tenant_id != console.tenant.pk:
        raise NotFound(MEMBER_NOT_FOUND)
    return found


def _invitation(console: ConsoleTenant, invitation_id: str) -> Invitation:
    found = invitation_get_for_admin(by=console.person, invitation_id=invitation_id)
    if found.tenant_id != console.tenant.pk:
        raise NotFound(INVITATION_NOT_FOUND)
    return found


def _back(console: ConsoleTenant) -> HttpResponse:
    # Someone who removed themselves has no members page of this tenant left to see.
    if membership_get(user=console.person, tenant=console.tenant) is None:
        return redirect("console:home")
    return redirect("console:members", slug=console.tenant.slug)


@console_change(page=_page)
def invitation_send(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    email, role = str(request.POST.get("email", "")), str(request.POST.get("role", ""))
    try:
        invitation, _ = invitation_create(by=console.person, tenant=console.tenant, email=email, role=role)
    except GatehouseError as error:
        # The form again as it was sent (escaped by the template, cut to what fits).
        form = {"email": text_cleaned(email)[:EMAIL_MAX_LENGTH], "role": role}
        return refused_page(partial(_page, form=form), request, console, error)
    days = settings.INVITATION_VALID_DAYS
    messages.success(
        request, INVITATION_SENT.format(email=invitation.email, days=days, plural="" if days == 1 else "s")
    )
    return redirect("console:members", slug=console.tenant.slug)


@console_change(page=_page)
def invitation_cancel(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    invitation = _invitation(console, str(request.POST.get("invitation", "")))
    invitation_revoke(by=console.person, invitation=invitation)
    messages.success(request, INVITATION_CANCELLED.format(email=invitation.email))
    return redirect("console:members", slug=console.tenant.slug)


@console_change(page=_page)
def member_role(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    membership = _membership(console, str(request.POST.get("member", "")))
    before = membership.role
    changed = member_role_change(
        by=console.person, membership=membership, role=str(request.POST.get("role", ""))
    )
    message = ROLE_CHANGED if changed.role != before else ROLE_UNCHANGED
    messages.success(
        request,
        message.format(
            username=changed.user.get_username(),
            role=changed.get_role_display().lower(),
            tenant=console.tenant.name,
        ),
    )
    return _back(console)


@console_change(page=_page)
def member_delete(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    membership = _membership(console, str(request.POST.get("member", "")))
    member_remove(by=console.person, membership=membership)
    messages.success(
        request, MEMBER_REMOVED.format(username=membership.user.get_username(), tenant=console.tenant.name)
    )
    return _back(console)


urlpatterns: list[URLPattern] = [
    path("<slug:slug>/members/invite/", invitation_send, name="member-invite"),
    path("<slug:slug>/members/invitations/cancel/", invitation_cancel, name="invitation-cancel"),
    path("<slug:slug>/members/role/", member_role, name="member-role"),
    path("<slug:slug>/members/remove/", member_delete, name="member-remove"),
]

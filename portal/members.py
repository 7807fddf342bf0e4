"""A tenant admin's members page (``/accounts/members/``): the people of the tenants where they are
an admin with their roles (change one, remove someone), the open invitations (revoke one), and a
form to invite someone by email (``accounts.invitations``).

Thin: each form is parsed here and handed to one service; what a service refuses comes back as the
page with its message and status. Another tenant's member, invitation or tenant is 404, exactly as
one that does not exist; a person who is an admin nowhere gets 403.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from accounts.invitations.members import member_remove, member_role_change
from accounts.invitations.selectors import (
    invitation_get_for_admin,
    invitation_list_open_for_admin,
    membership_get_for_admin,
    membership_list_for_admin,
)
from accounts.invitations.services import EMAIL_MAX_LENGTH, invitation_create, invitation_revoke
from accounts.models import Role, Tenant, User
from accounts.selectors import tenant_list_administered
from core.errors import GatehouseError, NotFound, PermissionDenied, RateLimited
from core.text_safety import text_cleaned
from oauth.parameter_guard import request_unsafe_parameter

ADMINS_ONLY = "Only a tenant's admins manage its members, and you are an admin of no tenant."
TENANT_NOT_YOURS = "That tenant is not one where you are an admin."
INVITATION_SENT = "An invitation was sent to {email}; its link works for {days} day{plural}."
INVITATION_REVOKED = "The invitation of {email} was revoked; its link no longer works."
ROLE_CHANGED = "{username} is now {role} in {tenant}."
MEMBER_REMOVED = "{username} was removed from {tenant}."
TEMPLATE = "accounts/members.html"


def _person(request: HttpRequest) -> User:
    # login_required has run, so this is a signed-in person, never AnonymousUser.
    assert isinstance(request.user, User)
    return request.user


def _admin_tenants(request: HttpRequest) -> QuerySet[Tenant]:
    """The active tenants where the signed-in person is an admin; refused if there is none."""
    tenants = tenant_list_administered(user=_person(request))
    if not tenants.exists():
        raise PermissionDenied(ADMINS_ONLY)
    return tenants


def _page(
    request: HttpRequest,
    tenants: QuerySet[Tenant],
    *,
    error: str = "",
    status: int = 200,
    form: dict[str, str] | None = None,
) -> HttpResponse:
    person = _person(request)
    context = {
        "members": membership_list_for_admin(by=person),
        "invitations": invitation_list_open_for_admin(by=person),
        "now": timezone.now(),
        "tenants": tenants,
        "roles": Role.choices,
        "error": error,
        "form": form or {"role": Role.VIEWER.value},
        "email_max_length": EMAIL_MAX_LENGTH,
        # The navigation's Members link (accounts/portal_nav.html).
        "administers": True,
    }
    return render(request, TEMPLATE, context, status=status)


def _refused(request: HttpRequest, error: GatehouseError, form: dict[str, str] | None = None) -> HttpResponse:
    """The page again, saying what a service refused, with the refusal's status."""
    response = _page(
        request, _admin_tenants(request), error=error.message, status=error.http_status, form=form
    )
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.retry_after_seconds)
    return response


def _unsafe(request: HttpRequest) -> HttpResponse | None:
    """The page with the reason, for a form carrying a NUL or invalid UTF-8 (no lookup could use it)."""
    problem = request_unsafe_parameter(request)
    if problem is None:
        return None
    return _page(request, _admin_tenants(request), error=problem, status=400)


def _after_change(request: HttpRequest) -> HttpResponse:
    # A person who gave up their own admin role has no members page left to see.
    if tenant_list_administered(user=_person(request)).exists():
        return redirect("accounts:members")
    return redirect("home")


@never_cache
@login_required
@require_GET
def member_page(request: HttpRequest) -> HttpResponse:
    return _page(request, _admin_tenants(request))


@never_cache
@login_required
@require_POST
def invitation_send(request: HttpRequest) -> HttpResponse:
    if (refused := _unsafe(request)) is not None:
        return refused
    tenants = _admin_tenants(request)
    slug = str(request.POST.get("tenant", ""))
    email, role = str(request.POST.get("email", "")), str(request.POST.get("role", ""))
    tenant = next((tenant for tenant in tenants if tenant.slug == slug), None)
    if tenant is None:
        raise NotFound(TENANT_NOT_YOURS)
    try:
        invitation, _ = invitation_create(by=_person(request), tenant=tenant, email=email, role=role)
    except GatehouseError as error:
        # The form comes back as it was sent (escaped by the template, cut to what fits), with
        # what is wrong.
        form = {"tenant": slug, "email": text_cleaned(email)[:EMAIL_MAX_LENGTH], "role": role}
        return _refused(request, error, form)
    days = settings.INVITATION_VALID_DAYS
    messages.success(
        request, INVITATION_SENT.format(email=invitation.email, days=days, plural="" if days == 1 else "s")
    )
    return redirect("accounts:members")


@never_cache
@login_required
@require_POST
def invitation_cancel(request: HttpRequest) -> HttpResponse:
    if (refused := _unsafe(request)) is not None:
        return refused
    person = _person(request)
    _admin_tenants(request)
    invitation = invitation_get_for_admin(by=person, invitation_id=str(request.POST.get("invitation", "")))
    try:
        invitation_revoke(by=person, invitation=invitation)
    except GatehouseError as error:
        return _refused(request, error)
    messages.success(request, INVITATION_REVOKED.format(email=invitation.email))
    return redirect("accounts:members")


@never_cache
@login_required
@require_POST
def member_role_set(request: HttpRequest) -> HttpResponse:
    if (refused := _unsafe(request)) is not None:
        return refused
    person = _person(request)
    _admin_tenants(request)
    membership = membership_get_for_admin(by=person, membership_id=str(request.POST.get("member", "")))
    try:
        changed = member_role_change(by=person, membership=membership, role=str(request.POST.get("role", "")))
    except GatehouseError as error:
        return _refused(request, error)
    messages.success(
        request,
        ROLE_CHANGED.format(
            username=changed.user.get_username(),
            role=changed.get_role_display().lower(),
            tenant=changed.tenant.name,
        ),
    )
    return _after_change(request)


@never_cache
@login_required
@require_POST
def member_delete(request: HttpRequest) -> HttpResponse:
    if (refused := _unsafe(request)) is not None:
        return refused
    person = _person(request)
    _admin_tenants(request)
    membership = membership_get_for_admin(by=person, membership_id=str(request.POST.get("member", "")))
    try:
        member_remove(by=person, membership=membership)
    except GatehouseError as error:
        return _refused(request, error)
    messages.success(
        request, MEMBER_REMOVED.format(username=membership.user.get_username(), tenant=membership.tenant.name)
    )
    return _after_change(request)

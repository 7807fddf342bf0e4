"""The home page (what this server is, the address to give a client), and a signed-in person's own
pages: the applications connected to their account, and their live MCP sessions, each with a
button that ends it, and one that ends them all. Every row is looked up as the person's own, so
another person's client or session answers 404 (``accounts.connected``)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Role, User
from accounts.selectors import membership_list_for_user
from core.text_safety import text_cleaned
from portal.connected import (
    connection_get,
    connection_list_for_user,
    connection_revoke,
    session_end_all_for_user,
    session_end_for_user,
    session_list_for_user,
)
from portal.connected_display import connections_shown

DISCONNECTED = "{application} was disconnected from {tenant}; it will have to ask you again."
SESSION_ENDED = "The session of {application} in {tenant} was ended."
SESSIONS_ENDED = "{count} session{plural} ended; each application will have to start a new one."
NO_SESSION_TO_END = "No session was open, so none was ended."


def _person(request: HttpRequest) -> User:
    # login_required has run, so this is a signed-in person, never AnonymousUser.
    assert isinstance(request.user, User)
    return request.user


@never_cache
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """What this server is and the address to give a client; signed in, one's tenants and roles.

    The admin's "View site" link lands here too, so ``/`` is never a bare Not Found. Signed in, it
    also sums up the person's connected applications and live sessions, linking to the pages that
    end them."""
    context: dict[str, object] = {"mcp_url": settings.MCP_RESOURCE_URL}
    if isinstance(request.user, User):
        memberships = list(membership_list_for_user(user=request.user))
        context |= {
            "memberships": memberships,
            # Tenant admins manage service clients (portal.service_clients); the page is linked for them.
            "administers": any(membership.role == Role.ADMIN for membership in memberships),
            "connections": connection_list_for_user(user=request.user),
            "sessions": session_list_for_user(user=request.user),
        }
    return render(request, "accounts/home.html", context)


@never_cache
@login_required
@require_GET
def connected_list(request: HttpRequest) -> HttpResponse:
    rows = connections_shown(connections=connection_list_for_user(user=_person(request)))
    return render(request, "accounts/connected.html", {"rows": rows})


@never_cache
@login_required
@require_POST
def connected_disconnect(request: HttpRequest) -> HttpResponse:
    person = _person(request)
    connection = connection_get(
        user=person,
        client_id=str(request.POST.get("client_id", "")),
        tenant_slug=str(request.POST.get("tenant", "")),
    )
    connection_revoke(user=person, application=connection.application, tenant=connection.tenant)
    messages.success(
        request,
        DISCONNECTED.format(
            # A client's own words: what could reorder the sentence around it goes (text_cleaned).
            application=text_cleaned(connection.application.name or connection.application.client_id),
            tenant=connection.tenant.name,
        ),
    )
    return redirect("accounts:connected")


@never_cache
@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    sessions = session_list_for_user(user=_person(request))
    return render(request, "accounts/sessions.html", {"sessions": sessions})


@never_cache
@login_required
@require_POST
def session_end(request: HttpRequest) -> HttpResponse:
    session = session_end_for_user(user=_person(request), session_id=str(request.POST.get("session", "")))
    messages.success(
        request,
        SESSION_ENDED.format(
            application=text_cleaned(session.application.name or session.client_name),
            tenant=session.tenant.name,
        ),
    )
    return redirect("accounts:sessions")


@never_cache
@login_required
@require_POST
def session_end_all(request: HttpRequest) -> HttpResponse:
    ended = session_end_all_for_user(user=_person(request))
    if ended:
        messages.success(request, SESSIONS_ENDED.format(count=ended, plural="" if ended == 1 else "s"))
    else:
        messages.info(request, NO_SESSION_TO_END)
    return redirect("accounts:sessions")

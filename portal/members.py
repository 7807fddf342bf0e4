"""``/accounts/members/`` and its forms moved into the tenant console
(``/console/<tenant>/members/``, ``portal.console.members``). Their URL names stay, so links and
bookmarks keep working: each sends the person to the members page of the first tenant they
administer (else of their first tenant; else the console's start). A form posted here changes
nothing: it is answered with the same redirect, and the person does it again in the console.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts.models import User
from accounts.selectors import tenant_list_administered
from portal.console.access import console_first_tenant


@never_cache
@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def members_moved(request: HttpRequest) -> HttpResponseRedirect:
    # login_required has run, so this is a signed-in person, never AnonymousUser.
    assert isinstance(request.user, User)
    tenant = tenant_list_administered(user=request.user).first() or console_first_tenant(person=request.user)
    if tenant is None:
        return redirect("console:home")
    return redirect("console:members", slug=tenant.slug)


# The names portal/urls.py has always routed to.
member_page = invitation_send = invitation_cancel = member_role_set = member_delete = members_moved

"""The addresses the service clients page had before it moved into the console
(``portal.console.clients``): each sends the person to the clients of their first tenant there,
one they administer when there is one, so old links and bookmarks still land on the page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache

from accounts.models import User
from accounts.selectors import tenant_list_administered
from portal.console.access import console_first_tenant


@never_cache
@login_required
def service_clients_moved(request: HttpRequest) -> HttpResponse:
    """Any method: a form posted to the old address is not acted on, only sent to the new page."""
    assert isinstance(request.user, User)
    tenant = tenant_list_administered(user=request.user).first() or console_first_tenant(person=request.user)
    if tenant is None:
        return redirect("console:home")
    return redirect("console:clients", slug=tenant.slug)

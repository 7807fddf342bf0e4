"""The console's front page: what the tenant is, and where each section is."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from accounts.models import User
from portal.console.access import ConsoleTenant, console_first_tenant
from portal.console.pages import console_page, console_render

NO_TENANT = "You belong to no tenant yet: ask an administrator for an invitation."


@never_cache
@login_required
def console_home(request: HttpRequest) -> HttpResponse:
    """``/console/``: the person's first tenant (by name)."""
    assert isinstance(request.user, User)
    chosen = str(request.GET.get("tenant", ""))
    if chosen:
        # The switcher's choice; console_page refuses a tenant that is not the person's.
        return redirect("console:overview", slug=chosen) if _slug_like(chosen) else redirect("console:home")
    tenant = console_first_tenant(person=request.user)
    if tenant is None:
        return render(request, "console/refused.html", {"message": NO_TENANT}, status=404)
    return redirect("console:overview", slug=tenant.slug)


@console_page
def overview(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    return console_render(request, console, "console/overview.html", {})


def _slug_like(value: str) -> bool:
    return len(value) <= 63 and all(c.isascii() and (c.isalnum() or c in "-_") for c in value)

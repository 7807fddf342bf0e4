"""The console's members section: the members page of ``portal.members`` (invitations, roles,
removal) for this tenant's admins; the list, read-only, for its other people."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from accounts.models import Membership
from portal.console.access import ConsoleTenant
from portal.console.pages import console_page, console_render


@console_page
def members(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    people = (
        Membership.objects.filter(tenant=console.tenant).select_related("user").order_by("user__username")
    )
    return console_render(request, console, "console/members.html", {"members": people})

"""The console's tools section: the toolsets this deployment serves, on or off for the tenant, each
tool with the scopes it needs; the tenant's upstream servers, listed, with a link to their own page
(``upstreams``), where admins add, test and remove them. Admins switch a toolset on or off
(``toolsets.console_toolset_switch``); others see the same page without forms."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from core.errors import InvalidInput
from mcp_gateway.kernel.registry import default_registry
from portal.console.access import ConsoleTenant
from portal.console.changes import console_change
from portal.console.pages import console_page, console_render
from portal.console.toolsets import console_toolset_list, console_toolset_switch, console_upstream_list

SWITCHED = "{toolset} is now {state} for {tenant}: MCP clients see the change on their next request."
ALREADY = "{toolset} was already {state} for {tenant}."
STATE_UNKNOWN = "Say whether to switch the toolset on or off."
STATES = {"on": True, "off": False}
TEMPLATE = "console/tools.html"


def _page(
    request: HttpRequest, console: ConsoleTenant, *, error: str = "", status: int = 200
) -> HttpResponse:
    context = {
        "toolsets": console_toolset_list(tenant=console.tenant, registry=default_registry()),
        "upstreams": console_upstream_list(tenant=console.tenant),
        "error": error,
    }
    return console_render(request, console, TEMPLATE, context, status=status)


@require_GET
@console_page
def tools(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    return _page(request, console)


@console_change(page=_page)
def toolset_toggle(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    name, state = str(request.POST.get("toolset", "")), str(request.POST.get("state", ""))
    if state not in STATES:
        raise InvalidInput(STATE_UNKNOWN)
    changed = console_toolset_switch(
        console=console, toolset=name, enabled=STATES[state], registry=default_registry()
    )
    message = SWITCHED if changed else ALREADY
    messages.success(request, message.format(toolset=name, state=state, tenant=console.tenant.name))
    return redirect("console:tools", slug=console.tenant.slug)

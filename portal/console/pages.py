"""What every console page shares: its tenant resolved once, refusals as pages, the layout's
context (the tenant switcher, the sections, whether the person may change things)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from core.errors import GatehouseError
from portal.console.access import ConsoleTenant, console_tenant

# (url name, label): the console's sections, in the order the navigation shows them.
SECTIONS = [
    ("overview", "Overview"),
    ("members", "Members"),
    ("identity-provider", "Sign-in"),
    ("tools", "Tools"),
    ("upstreams", "Upstreams"),
    ("models", "Models and budgets"),
    ("clients", "Service clients"),
    ("usage", "Usage and audit"),
]

ConsoleView = Callable[..., HttpResponseBase]


def console_page(view: Callable[..., HttpResponseBase]) -> ConsoleView:
    """A console view: signed in, never cached, its ``ConsoleTenant`` as the second argument; a
    refusal (another tenant, a viewer's post) is a page with the error's status, never a 500."""

    @never_cache
    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, slug: str, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            console = console_tenant(request=request, slug=slug)
            return view(request, console, *args, **kwargs)
        except GatehouseError as error:
            return render(
                request, "console/refused.html", {"message": error.message}, status=error.http_status
            )

    return wrapped


SIGN_IN_FIRST = "Sign in first: this data is for the tenant's members."


def console_data(view: Callable[..., HttpResponseBase]) -> ConsoleView:
    """A console JSON endpoint: the same tenant check as ``console_page``, but every refusal is JSON
    (``{"error": message}`` with the error's status, 401 when signed out), since its caller is a
    page's script, which can show a message and cannot follow a redirect to a sign-in page."""

    @never_cache
    @wraps(view)
    def wrapped(request: HttpRequest, slug: str, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return JsonResponse({"error": SIGN_IN_FIRST}, status=401)
        try:
            console = console_tenant(request=request, slug=slug)
            return view(request, console, *args, **kwargs)
        except GatehouseError as error:
            return JsonResponse({"error": error.message}, status=error.http_status)

    return wrapped


def console_render(
    request: HttpRequest, console: ConsoleTenant, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    return render(
        request,
        template,
        {"console": console, "sections": SECTIONS, **context},
        status=status,
    )

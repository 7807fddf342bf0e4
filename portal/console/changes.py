"""What every console view that changes something shares, so each such view is only its parse and
its one service call: POST only, the tenant resolved (``console_page``), the tenant's admins only
(a viewer's post is 403: a form they were never shown), a form no lookup could survive (a NUL or
invalid UTF-8, ``oauth.parameter_guard``) answered as the section's page with the reason (400),
and what a service refuses answered as the section's page with its message and status.

A view that wants its refused form shown again as it was sent catches the service's error itself;
whatever it lets through comes back here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Protocol

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.views.decorators.http import require_POST

from core.errors import GatehouseError, RateLimited
from oauth.parameter_guard import request_unsafe_parameter
from portal.console.access import ConsoleTenant
from portal.console.pages import ConsoleView, console_page


class SectionPage(Protocol):
    """A section's page, shown again with a message above its forms and the answer's status."""

    def __call__(
        self, request: HttpRequest, console: ConsoleTenant, *, error: str = ..., status: int = ...
    ) -> HttpResponse: ...


def refused_page(
    page: SectionPage, request: HttpRequest, console: ConsoleTenant, error: GatehouseError
) -> HttpResponse:
    """The section's page saying what was refused, with the refusal's status (and when to try a
    rate-limited change again)."""
    response = page(request, console, error=error.message, status=error.http_status)
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.retry_after_seconds)
    return response


def console_change(*, page: SectionPage) -> Callable[[Callable[..., HttpResponseBase]], ConsoleView]:
    """A console view that changes something, its refusals shown on ``page`` (module docstring)."""

    def decorate(view: Callable[..., HttpResponseBase]) -> ConsoleView:
        @require_POST
        @console_page
        @wraps(view)
        def wrapped(
            request: HttpRequest, console: ConsoleTenant, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            # Before the form is read: a viewer learns nothing from a form they may not send.
            console.require_admin()
            problem = request_unsafe_parameter(request)
            if problem is not None:
                return page(request, console, error=problem, status=400)
            try:
                return view(request, console, *args, **kwargs)
            except GatehouseError as error:
                return refused_page(page, request, console, error)

        return wrapped

    return decorate

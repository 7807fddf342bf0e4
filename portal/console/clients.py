"""The console's service clients section, ``/console/<tenant>/clients/``: the tenant's server-side
applications (``oauth.service_clients``), which take REST API tokens with the client-credentials
grant. Its admins create one (its secret is on the answer to that request only: stored hashed,
never shown again) and delete one; its other people see the list. Another tenant's client is not
found, exactly as one that does not exist."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_GET

from accounts.models import Role, Tenant
from core.errors import GatehouseError
from oauth.service_clients import (
    NAME_MAX_LENGTH,
    service_client_create,
    service_client_delete,
    service_client_get,
    service_client_list_with_roles,
)
from portal.console.access import ConsoleTenant
from portal.console.changes import console_change
from portal.console.pages import console_page, console_render

TEMPLATE = "console/clients.html"
CLIENT_DELETED = "{name} was deleted; its tokens stopped working."


def _page(
    request: HttpRequest,
    console: ConsoleTenant,
    *,
    error: str = "",
    form: dict[str, str] | None = None,
    created: dict[str, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "clients": service_client_list_with_roles(tenant=console.tenant),
        "roles": Role.choices,
        "error": error,
        "form": form or {"role": Role.CONTRIBUTOR.value},
        "name_max_length": NAME_MAX_LENGTH,
        "created": created,
    }
    return console_render(request, console, TEMPLATE, context, status=status)


@require_GET
@console_page
def clients(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    return _page(request, console)


@console_change(page=_page)
def client_create(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    name, role = str(request.POST.get("name", "")), str(request.POST.get("role", ""))
    try:
        client, secret = service_client_create(
            tenant=console.tenant, name=name, role=role, created_by=console.person
        )
    except GatehouseError as error:
        # The form comes back as it was sent (escaped by the template), with what is wrong.
        form = {"name": name, "role": role}
        return _page(request, console, error=error.message, form=form, status=error.http_status)
    created = {
        "client": client,
        "secret": secret,
        "role": role,
        "token_url": f"{settings.PUBLIC_URL}{reverse('oauth2_provider:token')}",
        "api_resource": settings.API_RESOURCE_URL,
    }
    # The one answer that carries the secret: console_page marks it never-cached, and no redirect
    # or session keeps it for a later page.
    return _page(request, console, created=created)


@console_change(page=_page)
def client_delete(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    client = service_client_get(
        client_id=str(request.POST.get("client_id", "")),
        tenants=Tenant.objects.filter(pk=console.tenant.pk),
    )
    name = client.application.name
    service_client_delete(service_client=client, by=console.person)
    messages.success(request, CLIENT_DELETED.format(name=name))
    return redirect("console:clients", slug=console.tenant.slug)


urlpatterns: list[URLPattern] = [
    path("<slug:slug>/clients/", clients, name="clients"),
    path("<slug:slug>/clients/create/", client_create, name="client-create"),
    path("<slug:slug>/clients/delete/", client_delete, name="client-delete"),
]

"""A tenant admin's page for the tenant's service clients (``oauth.service_clients``): list,
create (the secret shown once, on the answer to the create request itself, never stored for a
later page) and delete. Only tenants where the person is an admin count: another tenant's client
answers 404, exactly as one that does not exist."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Role, Tenant, User
from accounts.selectors import tenant_list_administered
from core.errors import InvalidInput, NotFound, PermissionDenied
from oauth.service_clients import (
    NAME_MAX_LENGTH,
    service_client_create,
    service_client_delete,
    service_client_get,
    service_client_list,
    service_client_role,
)

ADMINS_ONLY = "Only a tenant's admins manage its service clients, and you are an admin of no tenant."
TENANT_NOT_YOURS = "That tenant is not one where you are an admin."
SERVICE_CLIENT_DELETED = "{name} was deleted; its tokens stopped working."
TEMPLATE = "accounts/service_clients.html"


def _admin_tenants(request: HttpRequest) -> QuerySet[Tenant]:
    """The active tenants where the signed-in person is an admin; refused if there is none."""
    assert isinstance(request.user, User)
    tenants = tenant_list_administered(user=request.user)
    if not tenants.exists():
        raise PermissionDenied(ADMINS_ONLY)
    return tenants


def _page(
    request: HttpRequest, tenants: QuerySet[Tenant], *, error: str = "", form: dict[str, str] | None = None
) -> HttpResponse:
    rows = [
        {"client": client, "role": service_client_role(service_client=client)}
        for client in service_client_list().filter(tenant__in=tenants)
    ]
    context = {
        "rows": rows,
        "tenants": tenants,
        "roles": Role.choices,
        "error": error,
        "form": form or {"role": Role.CONTRIBUTOR.value},
        "name_max_length": NAME_MAX_LENGTH,
    }
    return render(request, TEMPLATE, context, status=400 if error else 200)


@never_cache
@login_required
@require_GET
def service_client_page(request: HttpRequest) -> HttpResponse:
    return _page(request, _admin_tenants(request))


@never_cache
@login_required
@require_POST
def service_client_add(request: HttpRequest) -> HttpResponse:
    tenants = _admin_tenants(request)
    slug = str(request.POST.get("tenant", ""))
    name, role = str(request.POST.get("name", "")), str(request.POST.get("role", ""))
    tenant = next((tenant for tenant in tenants if tenant.slug == slug), None)
    if tenant is None:
        raise NotFound(TENANT_NOT_YOURS)
    assert isinstance(request.user, User)
    try:
        client, secret = service_client_create(tenant=tenant, name=name, role=role, created_by=request.user)
    except InvalidInput as error:
        # The form comes back as it was sent (escaped by the template), with what is wrong.
        return _page(request, tenants, error=error.message, form={"tenant": slug, "name": name, "role": role})
    token_url = f"{settings.PUBLIC_URL}{reverse('oauth2_provider:token')}"
    return render(
        request,
        "accounts/service_client_created.html",
        {
            "client": client,
            "secret": secret,
            "role": role,
            "token_url": token_url,
            "api_resource": settings.API_RESOURCE_URL,
        },
    )


@never_cache
@login_required
@require_POST
def service_client_remove(request: HttpRequest) -> HttpResponse:
    client = service_client_get(
        client_id=str(request.POST.get("client_id", "")), tenants=_admin_tenants(request)
    )
    name = client.application.name
    assert isinstance(request.user, User)
    service_client_delete(service_client=client, by=request.user)
    messages.success(request, SERVICE_CLIENT_DELETED.format(name=name))
    return redirect("accounts:service-clients")

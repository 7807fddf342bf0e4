"""The console's sign-in section, ``/console/<tenant>/identity-provider/``: the tenant's identity
provider (never its client secret, only whether one is stored), and for its admins the form that
changes it (``accounts.sign_in.provider_settings``; the checks are the admin's own,
``accounts.sign_in.forms``). A tenant without a provider is told how to get one: an operator adds
it in the admin, vouching for the email domains it serves."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_GET

from accounts.models import ExternalIdentity, IdentityProvider
from accounts.sign_in.forms import ProviderSettingsForm
from accounts.sign_in.provider_settings import (
    NO_PROVIDER,
    identity_provider_get_for_tenant,
    identity_provider_update,
)
from accounts.sign_in.roles import role_map_text
from core.errors import GatehouseError, NotFound
from portal.console.access import ConsoleTenant
from portal.console.changes import console_change
from portal.console.pages import console_page, console_render

TEMPLATE = "console/identity_provider.html"
SAVED = "The identity provider's settings are saved: {fields}."
UNLINKED = " The issuer changed, so {count} {people} will be linked again at their next sign-in."
UNCHANGED = "Nothing changed."


def _initial(provider: IdentityProvider) -> dict[str, Any]:
    return {
        "name": provider.name,
        "issuer": provider.issuer,
        "client_id": provider.client_id,
        "role_claim": provider.role_claim,
        "role_map_text": role_map_text(role_map=provider.role_map),
        "default_role": provider.default_role,
        "required": provider.required,
        "enabled": provider.enabled,
    }


def _page(
    request: HttpRequest,
    console: ConsoleTenant,
    *,
    form: ProviderSettingsForm | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    provider = identity_provider_get_for_tenant(tenant=console.tenant)
    context: dict[str, Any] = {
        "provider": provider,
        "error": error,
        "redirect_uri": f"{settings.PUBLIC_URL}{reverse('sign-in-callback')}",
        "sign_in_link": f"{settings.PUBLIC_URL}{reverse('sign-in-tenant', args=[console.tenant.slug])}",
    }
    if provider is not None:
        context["linked_people"] = ExternalIdentity.objects.filter(provider=provider).count()
        context["you_linked"] = ExternalIdentity.objects.filter(
            provider=provider, user=console.person
        ).exists()
        if console.can_change:
            # A refused form comes back as sent, its secret never: PasswordInput renders no value.
            context["form"] = form or ProviderSettingsForm(initial=_initial(provider))
    return console_render(request, console, TEMPLATE, context, status=status)


@require_GET
@console_page
def identity_provider(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    return _page(request, console)


@console_change(page=_page)
def identity_provider_save(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    if identity_provider_get_for_tenant(tenant=console.tenant) is None:
        raise NotFound(NO_PROVIDER.format(tenant=console.tenant.name))
    form = ProviderSettingsForm(request.POST)
    if not form.is_valid():
        return _page(request, console, form=form, status=422)
    data = form.cleaned_data
    try:
        change = identity_provider_update(
            by=console.person,
            tenant=console.tenant,
            name=data["name"],
            issuer=data["issuer"],
            client_id=data["client_id"],
            client_secret=data["client_secret"],
            role_claim=data["role_claim"],
            role_map=data["role_map_text"],
            default_role=data["default_role"],
            required=data["required"],
            enabled=data["enabled"],
        )
    except GatehouseError as error:
        field = (error.data or {}).get("field")
        if field not in form.fields:
            raise
        form.add_error(field, error.message)
        return _page(request, console, form=form, status=error.http_status)
    if not change.fields:
        messages.success(request, UNCHANGED)
    else:
        message = SAVED.format(fields=", ".join(field.replace("_", " ") for field in change.fields))
        if change.unlinked:
            people = "person" if change.unlinked == 1 else "people"
            message += UNLINKED.format(count=change.unlinked, people=people)
        messages.success(request, message)
    return redirect("console:identity-provider", slug=console.tenant.slug)


urlpatterns: list[URLPattern] = [
    path("<slug:slug>/identity-provider/", identity_provider, name="identity-provider"),
    path("<slug:slug>/identity-provider/save/", identity_provider_save, name="identity-provider-save"),
]

"""OAuth applications, grants and tokens for operators.

DOT registers admin pages for whatever models are configured; ours replace them to show the
tenant and where each client came from, and to revoke tokens through ``oauth.services`` (audited).
They build on DOT's classes, which already mask codes and tokens and never search by them.
"""

from __future__ import annotations

from typing import Any

# DOT's admin module registers its pages on import; it must run before ours replace them.
import oauth2_provider.admin as dot_admin
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from oauth2_provider.models import Application, get_application_model, get_id_token_model

from accounts.models import Role, User
from core.errors import InvalidInput
from oauth.models import (
    AccessToken,
    Grant,
    RedirectUriPattern,
    RefreshToken,
    RememberedConsent,
    ServiceClient,
)
from oauth.service_clients import (
    NAME_MAX_LENGTH,
    service_client_create,
    service_client_delete,
    service_client_name_clean,
    service_client_role,
)
from oauth.services import BY_OPERATOR, RevokedCounts, access_token_revoke, refresh_token_revoke

TOKEN_HASHED = "stored hashed"
SECRET_HASHED = "Stored hashed; it cannot be shown. Register a new client to issue a new secret."
SECRET_NONE = "None (public client)."
SECRET_HIDDEN = "Stored, and never shown here."
REVOKED_MESSAGE = "Revoked {access} access token(s) and {refresh} refresh token(s)."
SERVICE_CLIENT_CREATED = (
    "Created service client {name!r}. client_id: {client_id} — client secret: {secret} — "
    "the secret is shown only now and stored hashed; copy it to the application's configuration."
)
NO_MEMBERSHIP = "(membership removed)"

# DOT's ID tokens are not shown: Gatehouse is not an OpenID provider and never issues one.
for model in (get_application_model(), AccessToken, RefreshToken, Grant, get_id_token_model()):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


@admin.register(get_application_model())
class ApplicationAdmin(dot_admin.ApplicationAdmin):
    list_display = (
        "name", "client_id", "registration_source", "client_type", "authorization_grant_type", "user",
        "created",
    )  # fmt: skip
    list_filter = ("registration_source", "client_type", "authorization_grant_type", "skip_authorization")
    list_select_related = ("user",)
    search_fields = ("name", "client_id")
    date_hierarchy = "created"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = [*super().get_readonly_fields(request, obj), "created", "updated"]
        # In place of the excluded secret field (get_exclude).
        return readonly if obj is None else [*readonly, "secret"]

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        # Never render the stored secret (a hash, or for unhashed legacy clients the secret itself).
        exclude = tuple(super().get_exclude(request, obj) or ())
        return exclude if obj is None else (*exclude, "client_secret")

    @admin.display(description="client secret")
    def secret(self, application: Application) -> str:
        if not application.client_secret:
            return SECRET_NONE
        return SECRET_HASHED if application.hash_client_secret else SECRET_HIDDEN


class _TokenAdmin(admin.ModelAdmin):
    """Tokens are issued by the OAuth flows: operators look and revoke, nothing else."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Token")
    def masked_token(self, obj: Any) -> str:
        # Tokens are stored as checksums only (oauth.token_storage); older rows may still hold a
        # value, which DOT's mask shows by its last characters at most.
        return dot_admin.mask_credential(obj.token) if obj is not None and obj.token else TOKEN_HASHED

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    def _report(self, request: HttpRequest, counts: RevokedCounts) -> None:
        message = REVOKED_MESSAGE.format(access=counts.access, refresh=counts.refresh)
        self.message_user(request, message, messages.SUCCESS)


@admin.register(AccessToken)
class AccessTokenAdmin(_TokenAdmin, dot_admin.AccessTokenAdmin):
    list_display = ("pk", "masked_token", "user", "tenant", "application", "scope", "expires", "created")
    list_filter = ("tenant", "application", ("expires", admin.DateFieldListFilter))
    list_select_related = ("user", "tenant", "application")
    exclude = ("token_checksum",)
    actions = ("revoke_tokens",)

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> None:
        counts = RevokedCounts()
        for token in queryset.select_related("user", "tenant", "application"):
            counts += access_token_revoke(token=token, by=BY_OPERATOR, operator=request.user.get_username())
        self._report(request, counts)


@admin.register(RefreshToken)
class RefreshTokenAdmin(_TokenAdmin, dot_admin.RefreshTokenAdmin):
    list_display = ("pk", "masked_token", "user", "tenant", "application", "created", "revoked")
    list_filter = (
        "tenant",
        "application",
        ("revoked", admin.EmptyFieldListFilter),
        ("created", admin.DateFieldListFilter),
    )
    list_select_related = ("user", "tenant", "application")
    exclude = ("token_checksum",)
    actions = ("revoke_tokens",)

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[RefreshToken]) -> None:
        counts = RevokedCounts()
        for token in queryset:
            counts += refresh_token_revoke(token=token, by=BY_OPERATOR, operator=request.user.get_username())
        self._report(request, counts)


@admin.register(Grant)
class GrantAdmin(dot_admin.GrantAdmin):
    list_display = ("pk", "masked_code", "user", "tenant", "application", "expires", "created")
    list_filter = ("tenant", "application")
    list_select_related = ("user", "tenant", "application")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RedirectUriPattern)
class RedirectUriPatternAdmin(admin.ModelAdmin):
    list_display = ("pattern", "application", "note", "created")
    list_select_related = ("application",)
    search_fields = ("pattern", "note", "application__name", "application__client_id")
    autocomplete_fields = ("application",)
    readonly_fields = ("created",)


@admin.register(RememberedConsent)
class RememberedConsentAdmin(admin.ModelAdmin):
    """What people allowed once and are not asked again; deleting a row makes the next
    authorization show the consent page again (it revokes nothing)."""

    list_display = ["user", "application", "tenant", "scopes", "updated"]
    list_filter = ["tenant"]
    search_fields = ["user__username", "application__name", "application__client_id"]
    list_select_related = ["user", "application", "tenant"]
    readonly_fields = ["user", "application", "tenant", "scopes", "created", "updated"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _operator(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


class ServiceClientAddForm(forms.ModelForm):
    """Tenant, name and role; the rest (application, account, secret) is the service's to make."""

    # Unbounded here so an overlong name gets the service's own message, not the browser's limit.
    name = forms.CharField(
        strip=False, help_text=f"What the application is; at most {NAME_MAX_LENGTH} characters."
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.CONTRIBUTOR)

    class Meta:
        model = ServiceClient
        fields = ["tenant"]

    def clean_name(self) -> str:
        try:
            return service_client_name_clean(name=self.cleaned_data.get("name"))
        except InvalidInput as error:
            raise forms.ValidationError(error.message) from error


@admin.register(ServiceClient)
class ServiceClientAdmin(admin.ModelAdmin):
    """A tenant's server-side applications. Created and deleted through ``oauth.service_clients``
    (the secret is shown once, in the message after adding; deleting revokes the client's tokens
    and removes its account); nothing about one is edited in place."""

    list_display = ("tenant", "name", "role", "client_id", "created")
    list_filter = ("tenant",)
    list_select_related = ("tenant", "application", "account")
    search_fields = ("application__name", "application__client_id", "tenant__slug")
    readonly_fields = ("tenant", "name", "role", "client_id", "account", "created_by", "created")

    @admin.display(description="name", ordering="application__name")
    def name(self, obj: ServiceClient) -> str:
        return obj.application.name

    @admin.display(description="client ID")
    def client_id(self, obj: ServiceClient) -> str:
        return obj.application.client_id

    @admin.display(description="role")
    def role(self, obj: ServiceClient) -> str:
        return service_client_role(service_client=obj) or NO_MEMBERSHIP

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = ServiceClientAddForm
            kwargs["fields"] = ["tenant", "name", "role"]
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["tenant", "name", "role"] if obj is None else list(self.readonly_fields)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: ServiceClient, form: Any, change: bool) -> None:
        data = form.cleaned_data
        created, secret = service_client_create(
            tenant=data["tenant"], name=data["name"], role=data["role"], created_by=_operator(request)
        )
        # The admin's own bookkeeping (its log entry, the redirect) reads the saved row from here.
        obj.pk = created.pk
        obj.application = created.application
        obj.account = created.account
        obj.tenant = created.tenant
        obj.created = created.created
        self.message_user(
            request,
            SERVICE_CLIENT_CREATED.format(
                name=created.application.name, client_id=created.application.client_id, secret=secret
            ),
            messages.SUCCESS,
        )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # Nothing related is edited here; the service made the application, account and membership.
        return None

    def delete_model(self, request: HttpRequest, obj: ServiceClient) -> None:
        service_client_delete(service_client=obj, by=_operator(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ServiceClient]) -> None:
        for service_client in queryset.select_related("application", "account", "tenant"):
            service_client_delete(service_client=service_client, by=_operator(request))

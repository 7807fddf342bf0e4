"""OAuth applications, grants and tokens for operators.

DOT registers admin pages for whatever models are configured; ours replace them to show the
tenant and where each client came from, and to revoke tokens through ``oauth.services`` (audited).
They build on DOT's classes, which already mask codes and tokens and never search by them.
"""

from __future__ import annotations

from typing import Any

# DOT's admin module registers its pages on import; it must run before ours replace them.
import oauth2_provider.admin as dot_admin
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from oauth2_provider.models import Application, get_application_model, get_id_token_model

from oauth.models import AccessToken, Grant, RedirectUriPattern, RefreshToken, RememberedConsent
from oauth.services import BY_OPERATOR, RevokedCounts, access_token_revoke, refresh_token_revoke

TOKEN_HASHED = "stored hashed"
SECRET_HASHED = "Stored hashed; it cannot be shown. Register a new client to issue a new secret."
SECRET_NONE = "None (public client)."
SECRET_HIDDEN = "Stored, and never shown here."
REVOKED_MESSAGE = "Revoked {access} access token(s) and {refresh} refresh token(s)."

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

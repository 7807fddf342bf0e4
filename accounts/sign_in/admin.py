"""Operators configure a tenant's identity provider (``accounts.sign_in``): the client secret is
write-only, the email domains and the role map are written as text and checked line by line
(``sign_in.forms``, the checks the tenant console's form shares). Everything is the operators'
here; a tenant's admins change the connection and role mapping in the console."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from accounts.models import IdentityProvider
from accounts.sign_in.forms import (
    DOMAIN_INVALID,
    ISSUER_NOT_HTTPS,
    ProviderChecks,
    client_secret_field,
    issuer_field,
    role_map_field,
)
from accounts.sign_in.roles import role_map_text
from core.crypto import secret_encrypt

# Re-exported: the admin's tests name the messages where the admin shows them.
__all__ = ["DOMAIN_INVALID", "ISSUER_NOT_HTTPS", "IdentityProviderAdmin", "IdentityProviderForm"]

SECRET_STORED = "Stored encrypted; never shown. Enter a new secret to replace it."
SECRET_NONE = "None stored (a public client, PKCE only)."
FIELDS = [
    "tenant",
    "name",
    "issuer",
    "client_id",
    "client_secret",
    "email_domains_text",
    "role_claim",
    "role_map_text",
    "default_role",
    "required",
    "enabled",
    "accepts_identity_assertions",
]


class IdentityProviderForm(ProviderChecks, forms.ModelForm):
    """Everything of a provider, the checks shared with the console's form (``sign_in.forms``)."""

    client_secret = client_secret_field()
    email_domains_text = forms.CharField(
        label="Email domains",
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Separated by commas or spaces: the sign-in page sends these addresses here.",
    )
    issuer = issuer_field()
    role_map_text = role_map_field()

    class Meta:
        model = IdentityProvider
        fields = [
            "tenant",
            "name",
            "issuer",
            "client_id",
            "role_claim",
            "default_role",
            "required",
            "enabled",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["email_domains_text"].initial = ", ".join(self.instance.email_domains)
            self.fields["role_map_text"].initial = role_map_text(role_map=self.instance.role_map)

    def save(self, commit: bool = True) -> IdentityProvider:
        provider: IdentityProvider = super().save(commit=False)
        provider.email_domains = self.cleaned_data["email_domains_text"]
        provider.role_map = self.cleaned_data["role_map_text"]
        if self.cleaned_data.get("client_secret"):
            provider.client_secret_encrypted = secret_encrypt(plaintext=self.cleaned_data["client_secret"])
        if commit:
            provider.save()
        return provider


@admin.register(IdentityProvider)
class IdentityProviderAdmin(admin.ModelAdmin):
    form = IdentityProviderForm
    list_display = ["name", "tenant", "issuer", "required", "enabled", "updated"]
    list_filter = ["required", "enabled"]
    list_select_related = ["tenant"]
    search_fields = ["name", "issuer", "tenant__slug"]
    autocomplete_fields = ["tenant"]
    readonly_fields = ["secret_status", "created", "updated"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return FIELDS
        return [*FIELDS[:4], "secret_status", *FIELDS[4:], "created", "updated"]

    @admin.display(description="Stored client secret")
    def secret_status(self, provider: IdentityProvider) -> str:
        return SECRET_STORED if provider.client_secret_encrypted else SECRET_NONE

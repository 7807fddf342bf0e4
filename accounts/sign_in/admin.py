"""Operators configure a tenant's identity provider (``accounts.sign_in``): the client secret is
write-only, the email domains and the role map are written as text and checked line by line."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from accounts.models import ROLE_MAP_HELP, IdentityProvider
from accounts.sign_in.roles import role_map_parse, role_map_text
from core.crypto import secret_encrypt
from core.loopback import is_loopback_address
from core.text_safety import text_unstorable_reason

SECRET_STORED = "Stored encrypted; never shown. Enter a new secret to replace it."
SECRET_NONE = "None stored (a public client, PKCE only)."
SECRET_HELP = "Leave blank to keep the stored secret."
ISSUER_NOT_HTTPS = "The issuer must be an https URL (http only for a provider on this machine)."
ISSUER_HAS_QUERY = "The issuer is a plain URL, without a query or fragment."
DOMAIN_INVALID = "{domain!r} is not an email domain (such as example.com)."
DOMAINS_MAX = 50
DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
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


class IdentityProviderForm(forms.ModelForm):
    client_secret = forms.CharField(
        label="Client secret",
        required=False,
        strip=True,
        max_length=1000,
        widget=forms.PasswordInput(render_value=False),
        help_text=SECRET_HELP,
    )
    email_domains_text = forms.CharField(
        label="Email domains",
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Separated by commas or spaces: the sign-in page sends these addresses here.",
    )
    # Declared for assume_scheme: a bare host is read as https, as Django 6 will by default.
    issuer = forms.URLField(
        max_length=500,
        assume_scheme="https",
        help_text="The provider's issuer URL; discovery is at <issuer>/.well-known/openid-configuration.",
    )
    role_map_text = forms.CharField(
        label="Role map",
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=ROLE_MAP_HELP,
    )

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

    def clean_issuer(self) -> str:
        issuer = str(self.cleaned_data["issuer"]).rstrip("/")
        parts = urlsplit(issuer)
        if parts.query or parts.fragment:
            raise forms.ValidationError(ISSUER_HAS_QUERY)
        if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback_address(parts.hostname)):
            raise forms.ValidationError(ISSUER_NOT_HTTPS)
        return issuer

    def clean_email_domains_text(self) -> list[str]:
        domains: list[str] = []
        for domain in re.split(r"[\s,]+", str(self.cleaned_data.get("email_domains_text", "")).lower()):
            if not domain:
                continue
            if not DOMAIN.match(domain):
                raise forms.ValidationError(DOMAIN_INVALID.format(domain=domain[:100]))
            if domain not in domains:
                domains.append(domain)
        if len(domains) > DOMAINS_MAX:
            raise forms.ValidationError(f"At most {DOMAINS_MAX} domains.")
        return domains

    def clean_role_map_text(self) -> dict[str, str]:
        text = str(self.cleaned_data.get("role_map_text", ""))
        reason = text_unstorable_reason(text)
        if reason is not None:
            raise forms.ValidationError(f"The role map {reason}.")
        try:
            return role_map_parse(text=text)
        except ValueError as problem:
            raise forms.ValidationError(str(problem)) from None

    def clean_role_claim(self) -> str:
        claim = str(self.cleaned_data["role_claim"]).strip()
        if not re.fullmatch(r"[A-Za-z0-9_:/-]+(\.[A-Za-z0-9_:/-]+)*", claim):
            raise forms.ValidationError("A claim name, or a dotted path such as realm_access.roles.")
        return claim

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

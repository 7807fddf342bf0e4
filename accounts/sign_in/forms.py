"""How a tenant's identity provider settings are read from a form, one set of checks for both
places that change them: the operators' admin (``accounts.sign_in.admin``) and the tenant
console (``portal.console.identity_provider``). The client secret is write-only (blank keeps the
stored one); the role map is written as text, checked line by line (``roles``)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django import forms

from accounts.models import ROLE_MAP_HELP, Role
from accounts.sign_in.roles import role_map_parse
from core.loopback import is_loopback_address
from core.text_safety import text_invisible_character, text_unstorable_reason

SECRET_HELP = "Leave blank to keep the stored secret."
ISSUER_HELP = "The provider's issuer URL; discovery is at <issuer>/.well-known/openid-configuration."
ISSUER_NOT_HTTPS = "The issuer must be an https URL (http only for a provider on this machine)."
ISSUER_HAS_QUERY = "The issuer is a plain URL, without a query or fragment."
DOMAIN_INVALID = "{domain!r} is not an email domain (such as example.com)."
CLAIM_INVALID = "A claim name, or a dotted path such as realm_access.roles."
INVISIBLE = "This contains an invisible or control character ({code}). Type it again."
DOMAINS_MAX = 50
SECRET_MAX_CHARS = 1000
DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
CLAIM = re.compile(r"[A-Za-z0-9_:/-]+(\.[A-Za-z0-9_:/-]+)*")


def _visible(value: str) -> str:
    code = text_invisible_character(value)
    if code is not None:
        raise forms.ValidationError(INVISIBLE.format(code=code))
    return value


class ProviderChecks:
    """The checks of the fields both forms have: mixed into a ``Form`` or ``ModelForm``."""

    cleaned_data: dict[str, Any]

    def clean_issuer(self) -> str:
        issuer = _visible(str(self.cleaned_data["issuer"]).rstrip("/"))
        parts = urlsplit(issuer)
        if parts.query or parts.fragment:
            raise forms.ValidationError(ISSUER_HAS_QUERY)
        if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback_address(parts.hostname)):
            raise forms.ValidationError(ISSUER_NOT_HTTPS)
        return issuer

    def clean_name(self) -> str:
        return _visible(str(self.cleaned_data["name"]))

    def clean_client_id(self) -> str:
        return _visible(str(self.cleaned_data["client_id"]))

    def clean_client_secret(self) -> str:
        return _visible(str(self.cleaned_data.get("client_secret") or ""))

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
        if not CLAIM.fullmatch(claim):
            raise forms.ValidationError(CLAIM_INVALID)
        return claim


def client_secret_field() -> forms.CharField:
    return forms.CharField(
        label="Client secret",
        required=False,
        strip=True,
        max_length=SECRET_MAX_CHARS,
        widget=forms.PasswordInput(render_value=False),
        help_text=SECRET_HELP,
    )


def issuer_field() -> forms.URLField:
    # assume_scheme: a bare host is read as https, as Django 6 will by default.
    return forms.URLField(max_length=500, assume_scheme="https", help_text=ISSUER_HELP)


def role_map_field() -> forms.CharField:
    return forms.CharField(
        label="Role map",
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=ROLE_MAP_HELP,
    )


class ProviderSettingsForm(ProviderChecks, forms.Form):
    """What a tenant's admins change of their provider in the console: how Gatehouse reaches it
    and how its people's roles are mapped, and whether its people must sign in through it. The
    email domains and identity assertions stay the operators' (the admin): a domain routes
    everyone typing an address of it, so only an operator vouches that the tenant owns it."""

    name = forms.CharField(max_length=100, help_text="Shown as 'Sign in with <name>'.")
    issuer = issuer_field()
    client_id = forms.CharField(label="Client id", max_length=255)
    client_secret = client_secret_field()
    role_claim = forms.CharField(
        max_length=100, help_text="The claim whose values map to roles (a list or a string)."
    )
    role_map_text = role_map_field()
    default_role = forms.ChoiceField(
        choices=[("", "None: they cannot sign in"), *Role.choices],
        required=False,
        help_text="The role of a person none of whose values is mapped.",
    )
    required = forms.BooleanField(
        required=False,
        help_text="The tenant's members sign in through this provider only, never by password.",
    )
    enabled = forms.BooleanField(required=False, help_text="Sign-in through this provider is on.")

"""The upstreams page's form: it only turns posted text into the values
``upstreams.services.upstream_save`` takes; every rule of what may be stored (name, URL, header,
tool lists, scopes) is ``upstreams.validation``'s, applied by the service, so the console refuses
what the admin and the command line refuse, in the same words. stdio is refused here too, in the
operators' words, for a form that posts it anyway.

An OpenAPI upstream's document comes by its URL or as an upload (the form is multipart); the upload
is capped by ``upstreams.forms.OpenAPIDocumentField`` and handed to the service as bytes."""

from __future__ import annotations

from typing import Any

from django import forms

from accounts.scopes import SCOPE_READ, scope_definitions
from upstreams.forms import (
    BASE_URL_HELP,
    OPENAPI_REFETCH_HELP,
    OPENAPI_URL_HELP,
    OpenAPIDocumentField,
    RemoteTransportField,
    ToolNamesField,
    openapi_arguments,
    openapi_upload_check,
    secret_field,
)
from upstreams.models import PROTOCOL_HELP, AuthKind, Upstream, UpstreamProtocol

CREDENTIALS_BOTH = "Enter a new credential or remove the stored ones, not both."
# Generous bounds that only keep a hostile post from being carried around; the service's own limits
# (``upstreams.validation``) are lower and say so.
MAX_POSTED = 20_000


def _text(label: str, *, required: bool = False, help_text: str = "", **attrs: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=required,
        max_length=MAX_POSTED,
        help_text=help_text,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false", **attrs}),
    )


class UpstreamConsoleForm(forms.Form):
    name = _text(
        "Name",
        required=True,
        help_text="Lowercase letters, digits and hyphens, unique in the tenant. With prefix tools "
        "on, its tools are published as <name>_<tool>.",
    )
    enabled = forms.BooleanField(
        label="Enabled", required=False, help_text="Saving an enabled upstream connects to it first."
    )
    transport = RemoteTransportField(label="Transport")
    url = _text("URL", inputmode="url", help_text=f"{BASE_URL_HELP} Without credentials.")
    protocol = forms.ChoiceField(
        label="Protocol", choices=UpstreamProtocol.choices, required=False, help_text=PROTOCOL_HELP
    )
    openapi_url = _text("Document URL", inputmode="url", help_text=OPENAPI_URL_HELP)
    openapi_file = OpenAPIDocumentField(label="Or upload the document")
    openapi_refetch = forms.BooleanField(
        label="Fetch the document again", required=False, help_text=OPENAPI_REFETCH_HELP
    )
    auth = forms.ChoiceField(label="Credentials", choices=AuthKind.choices)
    header_name = _text(
        "Header or query parameter name",
        help_text="For a static header, such as Authorization; for an API key in the query, the "
        "parameter's name (OpenAPI only).",
    )
    header_value = secret_field(
        label="Header value or API key",
        help_text="Such as Bearer and a token, or the key. Stored encrypted, never shown; blank keeps "
        "the stored value.",
    )
    oauth_client_id = _text("OAuth client id")
    oauth_client_secret = secret_field(
        label="OAuth client secret", help_text="Stored encrypted, never shown; blank keeps the stored secret."
    )
    oauth_scope = _text("OAuth scope", help_text="Optional: the scope to ask the upstream's server for.")
    remove_credentials = forms.BooleanField(
        label="Remove the stored credentials",
        required=False,
        help_text="Drops the stored header value and OAuth client secret.",
    )
    include_tools = ToolNamesField(label="Only these tools")
    exclude_tools = ToolNamesField(label="Never these tools")
    prefix_tools = forms.BooleanField(label="Prefix tools with the upstream's name", required=False)
    scopes = forms.MultipleChoiceField(
        label="Scopes a caller needs",
        widget=forms.CheckboxSelectMultiple,
        choices=(),
        help_text="mcp:read lets every member use it.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        scopes = self.fields["scopes"]
        assert isinstance(scopes, forms.MultipleChoiceField)
        scopes.choices = [(name, name) for name in sorted(scope_definitions())]
        if not self.is_bound and not self.initial:
            self.initial = {
                "enabled": True,
                "scopes": [SCOPE_READ],
                "auth": AuthKind.NONE,
                "protocol": UpstreamProtocol.AUTO,
            }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("remove_credentials") and (
            cleaned.get("header_value") or cleaned.get("oauth_client_secret")
        ):
            self.add_error("remove_credentials", CREDENTIALS_BOTH)
        openapi_upload_check(self, cleaned)
        return cleaned

    def apply(self, upstream: Upstream) -> None:
        """Set ``upstream``'s fields from the form (the credentials are ``secrets()``)."""
        data = self.cleaned_data
        for name in (
            "name",
            "enabled",
            "transport",
            "url",
            "openapi_url",
            "auth",
            "header_name",
            "oauth_client_id",
            "oauth_scope",
            "include_tools",
            "exclude_tools",
            "prefix_tools",
        ):
            setattr(upstream, name, data[name])
        upstream.scopes = list(data["scopes"])
        # Not offered for OpenAPI (plain HTTP requests): left as it was.
        upstream.protocol = data.get("protocol") or upstream.protocol or UpstreamProtocol.AUTO

    def secrets(self) -> tuple[str | None, str | None]:
        """The header value and OAuth client secret for ``upstream_save``: None keeps the stored
        one, an empty value removes it."""
        if self.cleaned_data.get("remove_credentials"):
            return "", ""
        return (
            self.cleaned_data.get("header_value") or None,
            self.cleaned_data.get("oauth_client_secret") or None,
        )

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document's arguments for ``upstream_save`` (none for other transports)."""
        return openapi_arguments(self.cleaned_data)


def upstream_initial(upstream: Upstream) -> dict[str, Any]:
    """The change form's values: everything but the credentials, which are never shown."""
    return {
        "name": upstream.name,
        "enabled": upstream.enabled,
        "transport": upstream.transport,
        "protocol": upstream.protocol,
        "url": upstream.url,
        "openapi_url": upstream.openapi_url,
        "auth": upstream.auth,
        "header_name": upstream.header_name,
        "oauth_client_id": upstream.oauth_client_id,
        "oauth_scope": upstream.oauth_scope,
        "include_tools": list(upstream.include_tools or ()),
        "exclude_tools": list(upstream.exclude_tools or ()),
        "prefix_tools": upstream.prefix_tools,
        "scopes": list(upstream.scopes or ()),
    }

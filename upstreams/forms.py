"""What the admin's and the tenant console's upstream forms share: how posted text becomes the
values ``upstreams.services.upstream_save`` takes (tool lists, lines), and the write-only boxes
that never render a stored or typed secret back. Every rule of what may be stored stays in
``upstreams.validation``, which the service applies; these only parse, so both forms refuse the
same things with the same words.

An OpenAPI upstream's document may be uploaded: the upload is capped here, before the service is
given its bytes, so a huge file is refused with the form's own words rather than carried around;
what the bytes must be (UTF-8 JSON or YAML, an OpenAPI 3.0 or 3.1 document) is the service's to
say, under the same box."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.template.defaultfilters import filesizeformat

from upstreams.models import Transport
from upstreams.openapi.document import MAX_DOCUMENT_BYTES, TOO_BIG
from upstreams.validation import STDIO_OPERATORS_ONLY

TOOLS_HELP = "Tool names (the upstream's own), one per line or separated by commas."
SECRET_STORED = "Stored encrypted; never shown. Enter a new value to replace it."
SECRET_NOT_SET = "Not set."
OPENAPI_FILE_HELP = (
    "An OpenAPI 3.0 or 3.1 document, JSON or YAML, at most {limit}. An upload replaces the stored "
    "document, and the document URL is cleared."
)
OPENAPI_UPLOAD_NOT_OPENAPI = "A document is uploaded for an OpenAPI upstream only (transport OpenAPI)."
OPENAPI_URL_HELP = (
    "Where Gatehouse fetches the document (http:// or https://), or upload it below. It is fetched "
    "again when the URL changes, or when asked to."
)
OPENAPI_REFETCH_HELP = "Fetch the document from its URL again on this save, to pick up new operations."
BASE_URL_HELP = (
    "http and sse: the server's URL. OpenAPI: the API's base URL; blank takes the document's first server."
)
# The service names the document by its model field; the forms' box for it is the upload.
FORM_FIELD_FOR = {"openapi_document": "openapi_file"}
REMOTE_TRANSPORTS = [(value, label) for value, label in Transport.choices if value != Transport.STDIO]


def text_lines(value: str) -> list[str]:
    """The non-blank lines of ``value``, each without a trailing carriage return."""
    return [line.rstrip("\r") for line in value.split("\n") if line.strip()]


def tool_names_split(value: str) -> list[str]:
    """Tool names separated by commas, spaces or line breaks."""
    return [name for name in re.split(r"[\s,]+", value) if name]


class WriteOnlyTextarea(forms.Textarea):
    """A text box that never renders a value back, not even what was just posted (like
    ``PasswordInput(render_value=False)``)."""

    def format_value(self, value: Any) -> str | None:
        return None


class ToolNamesField(forms.CharField):
    """A list of tool names, typed as text: a stored list is shown one name a line."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", TOOLS_HELP)
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 2}))
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return "\n".join(str(name) for name in value)
        return value

    def clean(self, value: Any) -> list[str]:
        # The text is validated as text (a NUL refused as in any box), then split.
        return tool_names_split(super().clean(value) or "")


class RemoteTransportField(forms.ChoiceField):
    """Streamable HTTP or SSE. stdio, which runs a command on Gatehouse's machine, is the
    operators' alone: posted anyway, it is refused in those words rather than as an unknown choice."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("choices", REMOTE_TRANSPORTS)
        super().__init__(**kwargs)

    def validate(self, value: Any) -> None:
        if value == Transport.STDIO:
            raise ValidationError(STDIO_OPERATORS_ONLY, code="stdio")
        super().validate(value)


def secret_field(*, label: str, help_text: str) -> forms.CharField:
    """A write-only box: blank keeps the stored value; what is typed is never shown again."""
    return forms.CharField(
        label=label,
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=help_text,
    )


def form_field_for(field: Any) -> str | None:
    """The form box an ``InvalidInput``'s ``field`` belongs under (None when it names none)."""
    if not isinstance(field, str):
        return None
    return FORM_FIELD_FOR.get(field, field)


class OpenAPIDocumentField(forms.FileField):
    """An uploaded OpenAPI document, cleaned to its bytes (None when nothing was uploaded), at most
    the service's own cap (``MAX_DOCUMENT_BYTES``), refused in its words before the bytes are read."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", OPENAPI_FILE_HELP.format(limit=filesizeformat(MAX_DOCUMENT_BYTES)))
        kwargs.setdefault(
            "widget",
            forms.FileInput(attrs={"accept": ".json,.yaml,.yml,application/json,application/yaml"}),
        )
        super().__init__(**kwargs)

    def clean(self, data: Any, initial: Any = None) -> bytes | None:
        upload = super().clean(data, initial)
        if not upload:
            return None
        # Django counts the bytes it received (a part's declared length is not used): what is
        # past the cap is refused before it is read into memory.
        if upload.size is None or upload.size > MAX_DOCUMENT_BYTES:
            raise ValidationError(TOO_BIG, code="too_large")
        return b"".join(upload.chunks())


def openapi_arguments(cleaned: dict[str, Any]) -> dict[str, Any]:
    """What ``upstream_save`` takes besides the row for an OpenAPI upstream's document: the
    uploaded bytes (None: fetch it from its URL, or keep the stored one) and whether to fetch it
    again. Other transports have no document, and are given none."""
    if cleaned.get("transport") != Transport.OPENAPI:
        return {}
    return {
        "openapi_document": cleaned.get("openapi_file"),
        "openapi_refetch": bool(cleaned.get("openapi_refetch")),
    }


def openapi_upload_check(form: forms.BaseForm, cleaned: dict[str, Any]) -> None:
    """Refuse an upload sent with another transport, which would otherwise be dropped unsaid."""
    if cleaned.get("openapi_file") is not None and cleaned.get("transport") != Transport.OPENAPI:
        form.add_error("openapi_file", OPENAPI_UPLOAD_NOT_OPENAPI)

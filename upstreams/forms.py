"""What the admin's and the tenant console's upstream forms share: how posted text becomes the
values ``upstreams.services.upstream_save`` takes (tool lists, lines), and the write-only boxes
that never render a stored or typed secret back. Every rule of what may be stored stays in
``upstreams.validation``, which the service applies; these only parse, so both forms refuse the
same things with the same words."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from upstreams.models import Transport
from upstreams.validation import STDIO_OPERATORS_ONLY

TOOLS_HELP = "Tool names (the upstream's own), one per line or separated by commas."
SECRET_STORED = "Stored encrypted; never shown. Enter a new value to replace it."
SECRET_NOT_SET = "Not set."
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

"""Operators configure a tenant's upstream MCP servers; the credentials are write-only.

The form saves through ``upstream_save`` while it is validated, so what the service refuses (a bad
URL, a failed connection test, a tool name collision) is shown on the form beside the field it
names, like any other form error, rather than as a server error after the form was accepted. Saves
and deletions are audited by the service, with the staff member who made them. What the form shares
with the tenant console's (parsing, write-only boxes) is ``upstreams.forms``. A
stdio upstream runs a command on Gatehouse's machine: only superusers may create, change or delete
one; other staff see stdio upstreams read-only and cannot pick the transport.

An OpenAPI upstream's document is given by its URL or uploaded (the form is then multipart, as the
admin makes any form with a file box); the service fetches or parses it, and the tools generated
from its operations are shown read-only once it is saved, by the names ``include_tools`` takes.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.formats import date_format
from django.utils.html import escape, format_html, format_html_join

from accounts.models import User
from accounts.scopes import scope_definitions
from core.errors import InvalidInput
from upstreams.check import UpstreamTestResult, left_out_lines
from upstreams.forms import (
    BASE_URL_HELP,
    OPENAPI_REFETCH_HELP,
    OPENAPI_URL_HELP,
    SECRET_NOT_SET,
    SECRET_STORED,
    OpenAPIDocumentField,
    ToolNamesField,
    WriteOnlyTextarea,
    form_field_for,
    openapi_arguments,
    openapi_upload_check,
    secret_field,
    text_lines,
)
from upstreams.models import NAME_HELP, AuthKind, Transport, Upstream
from upstreams.openapi.tools import openapi_operation_names
from upstreams.services import upstream_remove, upstream_save, upstream_test
from upstreams.sign_in.selectors import upstream_sign_in_statuses

ENV_HELP = "NAME=VALUE, one per line. Write-only: leave blank to keep the stored environment."
ARGS_HELP = "One argument per line."
ENV_LINE = "Line {line} is not NAME=VALUE."
ENV_BOTH = "Enter a new environment or remove the stored one, not both."
SAVED_TESTED = "Connected: {summary}."
SAVED_DISABLED = "Saved disabled: not connected, and not served to clients."
SAVED_TO_CONNECT = (
    "Saved: a tenant admin connects it (Connect, in the tenant console) to sign in; until then its "
    "tools are not served."
)
TEST_PASSED = "{name}: connected, {summary}."
TEST_FAILED = "{name}: {error}"
HEADER_NAME_HELP = (
    "The header's name (such as Authorization), or for an API key in the query the parameter's name."
)
HEADER_VALUE_HELP = (
    "The header's value (such as Bearer and a token), or the API key. Write-only: leave blank to keep "
    "the stored value."
)
DOCUMENT_UPLOADED = "Uploaded (no URL to fetch it again from)."
DOCUMENT_FETCHED = "Fetched from the document URL."
DOCUMENT_NONE = "None stored."
NO_OPERATIONS = "None (not an OpenAPI upstream, or none saved yet)."
SIGN_IN_CONNECTED = "Connected by {who}, {when}."
SIGN_IN_NOT_CONNECTED = "Not connected: a tenant admin connects it on the console's upstreams page."
SIGN_IN_NOT_USED = "Not used (only for OAuth sign-in)."

STDIO_FIELDS = ["command", "args", "env", "env_status", "remove_env", "cwd"]
OPENAPI_FIELDS = ["openapi_url", "openapi_file", "openapi_refetch", "openapi_status"]
# The form's fields around the write-only ones, in the order the page shows them.
FIELDS = [
    "tenant",
    "name",
    "enabled",
    "transport",
    "protocol",
    "url",
    *OPENAPI_FIELDS,
    *STDIO_FIELDS,
    "connect_timeout_seconds",
    "call_timeout_seconds",
    "include_tools",
    "exclude_tools",
    "prefix_tools",
    "scopes",
    "auth",
    "header_name",
    "header_value",
    "header_status",
    "oauth_client_id",
    "oauth_client_secret",
    "oauth_secret_status",
    "oauth_scope",
    "sign_in_status",
    "pass_identity",
]
# Boxes of the form only (no column holds what is typed), shown to those who may change the row.
WRITE_ONLY = {"env", "remove_env", "header_value", "oauth_client_secret", "openapi_file", "openapi_refetch"}
STATUS_FIELDS = {"env_status", "header_status", "oauth_secret_status", "openapi_status", "sign_in_status"}
RECORD_FIELDS = ["openapi_operations", "tool_names", "last_tested", "created", "updated"]


def _person(user: Any) -> User | None:
    return user if isinstance(user, User) else None


class UpstreamForm(forms.ModelForm):
    # Set per request by UpstreamAdmin.get_form: whether stdio is allowed, and who saves (audited).
    allow_stdio = False
    by: User | None = None

    args = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 3}), help_text=ARGS_HELP
    )
    include_tools = ToolNamesField()
    exclude_tools = ToolNamesField()
    scopes = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, choices=())
    # Write-only: a stored secret is never rendered back, not even in the password box.
    env = forms.CharField(
        label="Environment",
        required=False,
        strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text=ENV_HELP,
    )
    remove_env = forms.BooleanField(label="Remove the stored environment", required=False)
    header_value = secret_field(label="Header value or API key", help_text=HEADER_VALUE_HELP)
    oauth_client_secret = secret_field(
        label="OAuth client secret", help_text="Write-only: leave blank to keep the stored secret."
    )
    openapi_file = OpenAPIDocumentField(label="OpenAPI document (upload)")
    openapi_refetch = forms.BooleanField(
        label="Fetch the document again", required=False, help_text=OPENAPI_REFETCH_HELP
    )

    class Meta:
        model = Upstream
        fields = [name for name in FIELDS if name not in WRITE_ONLY | STATUS_FIELDS]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.saved = False
        self.test_result: UpstreamTestResult | None = None
        scopes = self.fields["scopes"]
        assert isinstance(scopes, forms.ChoiceField)
        scopes.choices = [(name, name) for name in sorted(scope_definitions())]
        protocol = self.fields.get("protocol")
        if protocol is not None:
            # A post without it (a script's, an older page's) keeps the upstream's, or the default.
            protocol.required = False
        transport = self.fields.get("transport")
        if isinstance(transport, forms.ChoiceField) and not self.allow_stdio:
            transport.choices = [
                (value, label) for value, label in Transport.choices if value != Transport.STDIO
            ]
        # The admin shows help text as HTML: the name's, which spells <name>_<tool>, is escaped.
        for name, help_text in (
            ("name", escape(NAME_HELP)),
            ("url", BASE_URL_HELP),
            ("openapi_url", OPENAPI_URL_HELP),
            ("header_name", HEADER_NAME_HELP),
        ):
            if name in self.fields:
                self.fields[name].help_text = help_text
        if self.instance.pk:
            self.initial["args"] = "\n".join(str(a) for a in self.instance.args or ())

    def clean_args(self) -> list[str]:
        return text_lines(self.cleaned_data.get("args") or "")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("env") and cleaned.get("remove_env"):
            self.add_error("remove_env", ENV_BOTH)
        openapi_upload_check(self, cleaned)
        return cleaned

    def _env(self) -> dict[str, str] | None:
        if self.cleaned_data.get("remove_env"):
            return {}
        text = self.cleaned_data.get("env") or ""
        if not text.strip():
            return None
        env: dict[str, str] = {}
        for number, line in enumerate(text_lines(text), start=1):
            name, sep, value = line.partition("=")
            if not sep or not name.strip():
                # The line itself may be a secret: only its number is said.
                raise InvalidInput(ENV_LINE.format(line=number), data={"field": "env"})
            env[name.strip()] = value
        return env

    def _post_clean(self) -> None:
        # Django's hook after the instance is built from the form (missing from the stubs).
        super()._post_clean()  # type: ignore[misc]
        if self.errors:
            return
        try:
            self.test_result = upstream_save(
                upstream=self.instance,
                allow_stdio=self.allow_stdio,
                header_value=self.cleaned_data.get("header_value") or None,
                oauth_client_secret=self.cleaned_data.get("oauth_client_secret") or None,
                env=self._env(),
                by=self.by,
                **openapi_arguments(self.cleaned_data),
            )
        except InvalidInput as error:
            field = form_field_for((error.data or {}).get("field"))
            self.add_error(field if field in self.fields else None, error.message)
            return
        self.saved = True


@admin.register(Upstream)
class UpstreamAdmin(admin.ModelAdmin):
    form = UpstreamForm
    list_display = ["name", "tenant", "transport", "enabled", "prefix_tools", "last_tested"]
    list_filter = ["transport", "enabled", "prefix_tools", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name", "tenant__slug", "url", "openapi_url", "command"]
    readonly_fields = [*sorted(STATUS_FIELDS), *RECORD_FIELDS]
    actions = ["test_connection"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = [f for f in FIELDS if obj is not None or f not in STATUS_FIELDS]
        if not request.user.is_superuser:
            fields = [f for f in fields if f not in STDIO_FIELDS]
        if obj is not None and not self.has_change_permission(request, obj):
            fields = [f for f in fields if f not in WRITE_ONLY]
        return [*fields, *(RECORD_FIELDS if obj is not None else [])]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = cast(type[UpstreamForm], super().get_form(request, obj, change, **kwargs))
        # modelform_factory made this class for this request alone.
        form.allow_stdio = request.user.is_superuser
        form.by = _person(request.user)
        return form

    def _stdio_guarded(self, request: HttpRequest, obj: Upstream | None) -> bool:
        return obj is not None and obj.transport == Transport.STDIO and not request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and not self._stdio_guarded(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and not self._stdio_guarded(request, obj)

    @admin.display(description="Stored environment")
    def env_status(self, upstream: Upstream) -> str:
        return SECRET_STORED if upstream.env_encrypted else SECRET_NOT_SET

    @admin.display(description="Stored header value")
    def header_status(self, upstream: Upstream) -> str:
        return SECRET_STORED if upstream.header_value_encrypted else SECRET_NOT_SET

    @admin.display(description="Stored OAuth client secret")
    def oauth_secret_status(self, upstream: Upstream) -> str:
        return SECRET_STORED if upstream.oauth_client_secret_encrypted else SECRET_NOT_SET

    @admin.display(description="OAuth sign-in")
    def sign_in_status(self, upstream: Upstream) -> str:
        if upstream.auth != AuthKind.OAUTH_CODE:
            return SIGN_IN_NOT_USED
        status = upstream_sign_in_statuses(upstream_ids=[upstream.pk])[upstream.pk]
        if not status.connected:
            return SIGN_IN_NOT_CONNECTED
        when = date_format(status.connected_at, "DATETIME_FORMAT") if status.connected_at else "-"
        return SIGN_IN_CONNECTED.format(who=status.connected_by or "-", when=when)

    @admin.display(description="Stored OpenAPI document")
    def openapi_status(self, upstream: Upstream) -> str:
        if upstream.openapi_document is None:
            return DOCUMENT_NONE
        return DOCUMENT_FETCHED if upstream.openapi_url else DOCUMENT_UPLOADED

    @admin.display(description="Tools from its operations")
    def openapi_operations(self, upstream: Upstream) -> str:
        """Every operation of the stored document, by the name include and exclude take (before
        any prefix), selected or not."""
        names = openapi_operation_names(document=upstream.openapi_document)
        if not names:
            return NO_OPERATIONS
        items = format_html_join("", "<li><code>{}</code></li>", ((name,) for name in names))
        return format_html('<ul class="openapi-operations">{}</ul>', items)

    def save_model(self, request: HttpRequest, obj: Upstream, form: Any, change: bool) -> None:
        # The form saved it through upstream_save while it was validated.
        if not form.saved:
            raise RuntimeError("An upstream is saved by its form's validation (upstream_save).")
        result = form.test_result
        if result is None and obj.enabled:
            self.message_user(request, SAVED_TO_CONNECT, messages.WARNING)
        elif result is None:
            self.message_user(request, SAVED_DISABLED, messages.WARNING)
        else:
            self.message_user(request, SAVED_TESTED.format(summary=result.summary), messages.SUCCESS)
            self._left_out(request, result)

    def delete_model(self, request: HttpRequest, obj: Upstream) -> None:
        upstream_remove(upstream=obj, by=_person(request.user))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Upstream]) -> None:
        for upstream in queryset.select_related("tenant"):
            upstream_remove(upstream=upstream, by=_person(request.user))

    def _left_out(self, request: HttpRequest, result: UpstreamTestResult, *, name: str = "") -> None:
        for line in left_out_lines(result):
            self.message_user(request, f"{name}: {line}" if name else line, messages.WARNING)

    @admin.action(description="Test connection", permissions=["change"])
    def test_connection(self, request: HttpRequest, queryset: QuerySet[Upstream]) -> None:
        for upstream in queryset.select_related("tenant"):
            result = upstream_test(upstream=upstream)
            if result.ok:
                self.message_user(
                    request, TEST_PASSED.format(name=upstream.name, summary=result.summary), messages.SUCCESS
                )
                self._left_out(request, result, name=upstream.name)
            else:
                self.message_user(
                    request, TEST_FAILED.format(name=upstream.name, error=result.error), messages.ERROR
                )

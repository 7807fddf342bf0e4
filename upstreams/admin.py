"""Operators configure a tenant's upstream MCP servers; the credentials are write-only.

The form saves through ``upstream_save`` while it is validated, so what the service refuses (a bad
URL, a failed connection test, a tool name collision) is shown on the form beside the field it
names, like any other form error, rather than as a server error after the form was accepted. Saves
and deletions are audited by the service, with the staff member who made them. What the form shares
with the tenant console's (parsing, write-only boxes) is ``upstreams.forms``. A
stdio upstream runs a command on Gatehouse's machine: only superusers may create, change or delete
one; other staff see stdio upstreams read-only and cannot pick the transport.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import User
from accounts.scopes import scope_definitions
from core.errors import InvalidInput
from upstreams.check import UpstreamTestResult, left_out_lines
from upstreams.forms import (
    SECRET_NOT_SET,
    SECRET_STORED,
    ToolNamesField,
    WriteOnlyTextarea,
    secret_field,
    text_lines,
)
from upstreams.models import Transport, Upstream
from upstreams.services import upstream_remove, upstream_save, upstream_test

ENV_HELP = "NAME=VALUE, one per line. Write-only: leave blank to keep the stored environment."
ARGS_HELP = "One argument per line."
ENV_LINE = "Line {line} is not NAME=VALUE."
ENV_BOTH = "Enter a new environment or remove the stored one, not both."
SAVED_TESTED = "Connected: {summary}."
SAVED_DISABLED = "Saved disabled: not connected, and not served to clients."
TEST_PASSED = "{name}: connected, {summary}."
TEST_FAILED = "{name}: {error}"

STDIO_FIELDS = ["command", "args", "env", "env_status", "remove_env", "cwd"]
# The form's fields around the write-only ones, in the order the page shows them.
FIELDS = [
    "tenant",
    "name",
    "enabled",
    "transport",
    "url",
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
    "pass_identity",
]
WRITE_ONLY = {"env", "remove_env", "header_value", "oauth_client_secret"}
STATUS_FIELDS = {"env_status", "header_status", "oauth_secret_status"}
RECORD_FIELDS = ["tool_names", "last_tested", "created", "updated"]


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
    header_value = secret_field(
        label="Header value", help_text="Write-only: leave blank to keep the stored value."
    )
    oauth_client_secret = secret_field(
        label="OAuth client secret", help_text="Write-only: leave blank to keep the stored secret."
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
        transport = self.fields.get("transport")
        if isinstance(transport, forms.ChoiceField) and not self.allow_stdio:
            transport.choices = [
                (value, label) for value, label in Transport.choices if value != Transport.STDIO
            ]
        if self.instance.pk:
            self.initial["args"] = "\n".join(str(a) for a in self.instance.args or ())

    def clean_args(self) -> list[str]:
        return text_lines(self.cleaned_data.get("args") or "")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("env") and cleaned.get("remove_env"):
            self.add_error("remove_env", ENV_BOTH)
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
            )
        except InvalidInput as error:
            field = (error.data or {}).get("field")
            self.add_error(field if field in self.fields else None, error.message)
            return
        self.saved = True


@admin.register(Upstream)
class UpstreamAdmin(admin.ModelAdmin):
    form = UpstreamForm
    list_display = ["name", "tenant", "transport", "enabled", "prefix_tools", "last_tested"]
    list_filter = ["transport", "enabled", "prefix_tools", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name", "tenant__slug", "url", "command"]
    readonly_fields = ["env_status", "header_status", "oauth_secret_status", *RECORD_FIELDS]
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

    def save_model(self, request: HttpRequest, obj: Upstream, form: Any, change: bool) -> None:
        # The form saved it through upstream_save while it was validated.
        if not form.saved:
            raise RuntimeError("An upstream is saved by its form's validation (upstream_save).")
        result = form.test_result
        if result is None:
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

"""The operators' view of the audit trail (read-only, filtered, exported as CSV) and of the
rate-limit rules (editable, with the defaults they override shown above the list)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.text import Truncator

from core.audit.export import audit_csv_lines
from core.csv_export import RecordAdmin
from core.models import AuditEvent, RateLimitRule
from core.ratelimit.rules import rate_limit_defaults, rate_limit_rule_validate


class _UsernameFilter(admin.SimpleListFilter):
    """A text box, not a list: a deployment may have more users than a sidebar can show."""

    title = "user"
    parameter_name = "user"
    template = "admin/text_input_filter.html"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # has_output() shows the filter only when there is something to choose.
        return [("", "")]

    def choices(self, changelist: Any) -> Any:
        others = [
            (name, value)
            for name, values in changelist.filter_params.items()
            if name != self.parameter_name
            for value in values
        ]
        yield {"value": self.value() or "", "parameter_name": self.parameter_name, "others": others}

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(user__username=self.value())
        return queryset


@admin.register(AuditEvent)
class AuditEventAdmin(RecordAdmin):
    # Fits a 1280-pixel screen beside the filters: the client by its name, long values cut short
    # (and wrapped, templates/admin/core/auditevent/change_list.html), and the ids (request,
    # session, address) left to the event's own page and the search box.
    list_display = [
        "created", "action", "outcome", "tenant", "username_short", "client", "target_short", "duration_ms",
    ]  # fmt: skip
    list_filter = [
        "tenant", "action", "outcome", ("created", admin.DateFieldListFilter), _UsernameFilter,
    ]  # fmt: skip
    list_select_related = ["tenant", "application"]
    date_hierarchy = "created"
    search_fields = ["username", "request_id", "session_id", "target", "client_id"]
    exclude = ["detail"]
    readonly_fields = ["detail_json"]
    actions = ["export_csv"]
    csv_filename_prefix = "audit"
    # Counting every row of a large audit table on each page view is slow; a filtered count is enough.
    show_full_result_count = False

    @admin.display(description="user", ordering="username")
    def username_short(self, event: AuditEvent) -> str:
        return _short(event.username)

    @admin.display(description="client", ordering="application__name")
    def client(self, event: AuditEvent) -> str:
        # A deleted client's events keep its id as text (the link is gone), so they still say which.
        if event.application is not None:
            return _short(event.application.name or event.application.client_id)
        return _short(event.client_id)

    @admin.display(description="target", ordering="target")
    def target_short(self, event: AuditEvent) -> str:
        return _short(event.target)

    @admin.display(description="detail")
    def detail_json(self, event: AuditEvent) -> str:
        return format_html("<pre>{}</pre>", json.dumps(event.detail, indent=2, sort_keys=True, default=str))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # The widest list in the admin: here the navigation sidebar gives its width to the table,
        # so that the list fits a 1280-pixel screen; the breadcrumbs still lead everywhere.
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, extra_context=context)

    def csv_lines(self, queryset: QuerySet[AuditEvent]) -> Iterator[str]:
        return audit_csv_lines(events=queryset)


# Enough to tell clients and targets apart; the event's own page shows them whole.
LIST_TEXT_MAX_CHARS = 32


def _short(value: str) -> str:
    return Truncator(value).chars(LIST_TEXT_MAX_CHARS)


class RateLimitRuleForm(forms.ModelForm):
    class Meta:
        model = RateLimitRule
        fields = ["scope", "target", "tenant", "limit", "period_seconds"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "scope" in cleaned:
            try:
                rate_limit_rule_validate(
                    scope=cleaned["scope"],
                    target=cleaned.get("target", ""),
                    tenant=cleaned.get("tenant"),
                    period_seconds=cleaned.get("period_seconds"),
                )
            except forms.ValidationError as exc:
                self.add_error(None, exc)
        return cleaned


@admin.register(RateLimitRule)
class RateLimitRuleAdmin(admin.ModelAdmin):
    form = RateLimitRuleForm
    list_display = ["scope", "target_or_all", "tenant", "limit", "period_seconds", "updated"]
    list_filter = ["scope", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["target", "tenant__slug"]
    autocomplete_fields = ["tenant"]

    @admin.display(description="target", ordering="target")
    def target_or_all(self, rule: RateLimitRule) -> str:
        return rule.target or "(all)"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Shown above the list, so operators see what their rules override.
        context = {**(extra_context or {}), "rate_limit_defaults": rate_limit_defaults()}
        return super().changelist_view(request, extra_context=context)

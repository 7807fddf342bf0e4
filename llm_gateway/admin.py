"""Operators see and change each tenant's LLM budgets, and read (and export) the usage records.

A budget's list shows what its tenant or person has used so far this period, summed from the usage
records in the same query as the page (a correlated subquery per column, not a query per row). The
form refuses a person who is not a member of the budget's tenant, and the model's constraints (one
budget per tenant or person and period, at least one limit, no negative limit) come back as form
errors. Every change is the console's service call (``llm_budget_save``, ``llm_budget_delete``),
audited as ``budget.changed`` with the operator's name. Usage records are the record budgets are
summed from: nobody adds, edits or deletes them here, since deleting one would quietly give its
tokens and cost back to the budget.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.db import IntegrityError
from django.db.models import (
    Case,
    DateTimeField,
    DecimalField,
    OuterRef,
    PositiveBigIntegerField,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.db.models.lookups import IsNull
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.text import Truncator

from accounts.models import Membership
from accounts.service_admin import ServiceAdmin, admin_object_adopt, admin_operator
from core.admin import LIST_TEXT_MAX_CHARS
from core.csv_export import CSV_CHUNK_ROWS, RecordAdmin, csv_lines, csv_text
from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from language_models.governed.budgets import budget_period_bounds
from language_models.governed.totals import usage_spent
from language_models.models import BudgetPeriod, LlmBudget, LlmUsage
from language_models.services import llm_budget_delete, llm_budget_save

PERSON_NOT_MEMBER = (
    "{username} is not a member of {tenant}. Choose one of its members (or service clients), "
    "or leave this empty for the whole tenant."
)
NOTE_UNSTORABLE = "The note {reason}."
WHOLE_TENANT = "whole tenant"
NO_PERSON = "-"

USAGE_CSV_COLUMNS = (
    "created", "id", "tenant", "username", "client_id", "client", "feature", "channel", "provider", "model",
    "key_source", "prompt_tokens", "completion_tokens", "total_tokens", "cost", "duration_ms", "outcome",
    "error_code", "structured", "request_id",
)  # fmt: skip


def period_starts(*, now: datetime) -> dict[str, datetime]:
    """When each budget period now running began, as the budget check counts it (UTC day, month)."""
    return {period: budget_period_bounds(period=period, now=now)[0] for period in BudgetPeriod}


def budgets_with_use(queryset: QuerySet[LlmBudget], *, now: datetime) -> QuerySet[LlmBudget]:
    """``queryset`` annotated with ``tokens_used`` and ``cost_used`` in each budget's current period.

    A whole-tenant budget counts every call of the tenant (a deleted person's too); a person's
    counts theirs. Refused and failed calls count for what they spent, usually nothing.
    """
    starts = period_starts(now=now)
    period_start = Case(
        *(When(period=period, then=Value(start)) for period, start in starts.items()),
        output_field=DateTimeField(),
    )
    calls = (
        LlmUsage.objects.filter(tenant=OuterRef("tenant"), created__gte=OuterRef("period_start"))
        .filter(Q(IsNull(OuterRef("user"), True)) | Q(user=OuterRef("user")))
        .order_by()
        .values("tenant")
    )
    tokens = calls.annotate(total=Sum("total_tokens")).values("total")
    cost = calls.annotate(total=Sum("cost")).values("total")
    return queryset.annotate(period_start=period_start).annotate(
        tokens_used=Coalesce(Subquery(tokens), Value(0), output_field=PositiveBigIntegerField()),
        cost_used=Coalesce(
            Subquery(cost), Value(Decimal(0)), output_field=DecimalField(max_digits=20, decimal_places=8)
        ),
    )


class LlmBudgetForm(forms.ModelForm):
    class Meta:
        model = LlmBudget
        fields = ["tenant", "user", "period", "max_tokens", "max_cost", "note"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            # A budget stays in its tenant: the services change a tenant's own budgets. Disabled,
            # not read-only, so the one-budget-per-period constraints are still checked here.
            self.fields["tenant"].disabled = True

    def clean_note(self) -> str:
        # Django refuses a NUL itself; an unpaired surrogate would fail PostgreSQL's insert.
        note: str = self.cleaned_data["note"]
        reason = text_unstorable_reason(note)
        if reason is not None:
            raise forms.ValidationError(NOTE_UNSTORABLE.format(reason=reason))
        return note

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        tenant, user = cleaned.get("tenant"), cleaned.get("user")
        if (
            tenant is not None
            and user is not None
            and not Membership.objects.filter(tenant=tenant, user=user).exists()
        ):
            self.add_error("user", PERSON_NOT_MEMBER.format(username=user.username, tenant=tenant.slug))
        return cleaned


@admin.register(LlmBudget)
class LlmBudgetAdmin(ServiceAdmin):
    # Another operator's budget for the same tenant (or person) and period, inserted first.
    raced = (IntegrityError, InvalidInput)
    form = LlmBudgetForm
    list_display = [
        "tenant", "person", "period", "max_tokens", "tokens_used", "max_cost", "cost_used", "note_short",
    ]  # fmt: skip
    list_filter = ["tenant", "period"]
    list_select_related = ["tenant", "user"]
    search_fields = ["tenant__slug", "user__username"]
    autocomplete_fields = ["tenant", "user"]
    readonly_fields = ["created", "updated"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[LlmBudget]:
        return budgets_with_use(super().get_queryset(request), now=timezone.now())

    def save_model(self, request: HttpRequest, obj: LlmBudget, form: Any, change: bool) -> None:
        data = form.cleaned_data
        saved = llm_budget_save(
            by=admin_operator(request),
            tenant=obj.tenant,
            budget_id=obj.pk if change else None,
            period=data["period"],
            max_tokens=data["max_tokens"],
            max_cost=data["max_cost"],
            person_id=data["user"].pk if data.get("user") is not None else None,
            note=data.get("note") or "",
        )
        admin_object_adopt(obj, saved)

    def delete_model(self, request: HttpRequest, obj: LlmBudget) -> None:
        llm_budget_delete(by=admin_operator(request), tenant=obj.tenant, budget_id=obj.pk)

    @admin.display(description="person", ordering="user__username")
    def person(self, budget: LlmBudget) -> str:
        return budget.user.username if budget.user is not None else WHOLE_TENANT

    @admin.display(description="tokens used this period", ordering="tokens_used")
    def tokens_used(self, budget: Any) -> int:
        return int(budget.tokens_used)

    @admin.display(description="cost used this period", ordering="cost_used")
    def cost_used(self, budget: Any) -> str:
        return f"{budget.cost_used:.4f}"

    @admin.display(description="note", ordering="note")
    def note_short(self, budget: LlmBudget) -> str:
        return _short(budget.note)


@admin.register(LlmUsage)
class LlmUsageAdmin(RecordAdmin):
    list_display = [
        "created", "tenant", "person", "client", "feature", "provider", "model_short", "total_tokens",
        "cost", "duration_ms", "outcome", "error_code",
    ]  # fmt: skip
    list_filter = [
        "tenant", "feature", "provider", "channel", "outcome", ("created", admin.DateFieldListFilter),
    ]  # fmt: skip
    list_select_related = ["tenant", "user", "application"]
    date_hierarchy = "created"
    search_fields = ["model", "request_id", "user__username"]
    actions = ["export_csv"]
    csv_filename_prefix = "llm-usage"
    # A busy gateway's table is large; counting all of it on each page view is slow.
    show_full_result_count = False

    @admin.display(description="person", ordering="user__username")
    def person(self, usage: LlmUsage) -> str:
        return _short(usage.user.username) if usage.user is not None else NO_PERSON

    @admin.display(description="client", ordering="application__name")
    def client(self, usage: LlmUsage) -> str:
        if usage.application is None:
            return NO_PERSON
        return _short(usage.application.name or usage.application.client_id)

    @admin.display(description="model", ordering="model")
    def model_short(self, usage: LlmUsage) -> str:
        return _short(usage.model)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Twelve columns: the navigation sidebar gives its width to the table, as on the audit trail.
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        response = super().changelist_view(request, extra_context=context)
        shown = getattr(response, "context_data", None)
        if shown is not None and shown.get("cl") is not None:
            # The totals of what the filters, search and date drill-down selected, every page of it.
            shown["usage_totals"] = usage_spent(records=shown["cl"].queryset)
        return response

    def csv_lines(self, queryset: QuerySet[LlmUsage]) -> Iterator[str]:
        rows = map(
            _usage_row,
            queryset.select_related("tenant", "user", "application").iterator(chunk_size=CSV_CHUNK_ROWS),
        )
        return csv_lines(header=USAGE_CSV_COLUMNS, rows=rows)


def _short(value: str) -> str:
    return Truncator(value).chars(LIST_TEXT_MAX_CHARS)


def _usage_row(usage: LlmUsage) -> list[Any]:
    # The model, request id, usernames and client names are chosen by callers: every text cell is
    # defused, the tenant's slug (letters, digits, - and _) cannot make a formula.
    application = usage.application
    return [
        usage.created.isoformat(),
        str(usage.id),
        usage.tenant.slug,
        csv_text(usage.user.username) if usage.user is not None else "",
        csv_text(application.client_id) if application is not None else "",
        csv_text(application.name) if application is not None else "",
        usage.feature,
        csv_text(usage.channel),
        csv_text(usage.provider),
        csv_text(usage.model),
        csv_text(usage.key_source),
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.total_tokens,
        "" if usage.cost is None else usage.cost,
        usage.duration_ms,
        usage.outcome,
        csv_text(usage.error_code),
        "true" if usage.structured else "false",
        csv_text(usage.request_id),
    ]

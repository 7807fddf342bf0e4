"""Operators see and change LLM budgets and read the usage records in the admin: the budget list
says what each budget has used this period, the form refuses what the gateway could not honour, and
the usage records are read-only, filterable and exported as CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from core.models import AuditAction, AuditEvent
from language_models.models import BudgetPeriod, LlmBudget, LlmUsage, UsageOutcome
from llm_gateway.admin import (
    NOTE_UNSTORABLE,
    PERSON_NOT_MEMBER,
    USAGE_CSV_COLUMNS,
    WHOLE_TENANT,
    LlmBudgetForm,
    budgets_with_use,
    period_starts,
)
from tests.support.admin_support import admin_url, post_action
from tests.support.factories import ApplicationFactory, MembershipFactory, TenantFactory, UserFactory
from tests.support.llm_admin_support import LlmBudgetFactory, LlmUsageFactory, usage_at

pytestmark = pytest.mark.django_db

EXPORT = "admin:language_models_llmusage_export"


def _listed(client: Any, model: Any, params: dict[str, Any] | None = None) -> list[Any]:
    response = client.get(admin_url(model, "changelist"), params or {})
    assert response.status_code == 200
    return list(response.context["cl"].result_list)


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


# Budgets: the list


def test_each_budget_counts_its_tenant_or_person_s_calls_since_its_period_began(member, owner):
    now = datetime(2026, 3, 15, 12, 30, tzinfo=UTC)
    day_start, month_start = datetime(2026, 3, 15, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)
    assert period_starts(now=now) == {"day": day_start, "month": month_start}
    tenant = member.tenant
    whole_day = LlmBudgetFactory.create(tenant=tenant, period=BudgetPeriod.DAY, max_tokens=1000)
    person_month = LlmBudgetFactory.create(
        tenant=tenant, user=member.user, period=BudgetPeriod.MONTH, max_tokens=None, max_cost=Decimal("5")
    )
    # Today: the member's call, the owner's, and a deleted person's count for the tenant.
    usage_at(LlmUsageFactory.create(membership=member, total_tokens=100, cost=Decimal("0.5")), now)
    usage_at(LlmUsageFactory.create(membership=owner, total_tokens=20, cost=None), day_start)
    usage_at(LlmUsageFactory.create(membership=owner, user=None, total_tokens=3, cost=Decimal("0.25")), now)
    # Before today, this month: the member's month counts it, the tenant's day does not.
    usage_at(LlmUsageFactory.create(membership=member, total_tokens=4000, cost=Decimal("1")), month_start)
    # Before either period, and another tenant's call today: nobody counts them.
    usage_at(
        LlmUsageFactory.create(membership=member, total_tokens=9, cost=Decimal("9")),
        month_start - timedelta(microseconds=1),
    )
    usage_at(LlmUsageFactory.create(total_tokens=50_000, cost=Decimal("50")), now)

    budgets: dict[int, Any] = {b.pk: b for b in budgets_with_use(LlmBudget.objects.all(), now=now)}

    used = {pk: (budget.tokens_used, budget.cost_used) for pk, budget in budgets.items()}
    assert used[whole_day.pk] == (123, Decimal("0.75"))
    assert used[person_month.pk] == (4100, Decimal("1.5"))


def test_the_budget_list_shows_who_and_what_was_used(client, operator, member):
    LlmBudgetFactory.create(tenant=member.tenant, max_tokens=1000)
    LlmBudgetFactory.create(tenant=member.tenant, user=member.user, max_tokens=None, max_cost=Decimal("5"))
    LlmUsageFactory.create(membership=member, total_tokens=321, cost=Decimal("1.25"))

    response = client.get(admin_url(LlmBudget, "changelist"))

    rows = {(row.user_id, row.tokens_used, row.cost_used) for row in response.context["cl"].result_list}
    assert rows == {(None, 321, Decimal("1.25")), (member.user.pk, 321, Decimal("1.25"))}
    page = response.content.decode()
    assert WHOLE_TENANT in page
    assert "321" in page
    assert "1.2500" in page


def test_a_budget_with_no_calls_has_used_nothing(client, operator, tenant):
    LlmBudgetFactory.create(tenant=tenant)
    [budget] = _listed(client, LlmBudget)
    assert (budget.tokens_used, budget.cost_used) == (0, Decimal(0))


def test_the_budget_list_reads_the_use_of_every_budget_in_the_same_queries(client, operator):
    def a_budget_in_use() -> None:
        membership = MembershipFactory.create()
        LlmBudgetFactory.create(tenant=membership.tenant)
        LlmBudgetFactory.create(tenant=membership.tenant, user=membership.user, period=BudgetPeriod.MONTH)
        LlmUsageFactory.create(membership=membership)

    a_budget_in_use()
    url = admin_url(LlmBudget, "changelist")
    few = _queries(client, url)
    for _ in range(25):
        a_budget_in_use()
    assert len(_listed(client, LlmBudget)) == 52
    assert _queries(client, url) == few, "a query per row"


def test_budgets_filter_by_tenant_and_period_and_search_by_slug_or_username(
    client, operator, member, outsider
):
    daily = LlmBudgetFactory.create(tenant=member.tenant, period=BudgetPeriod.DAY)
    monthly = LlmBudgetFactory.create(tenant=member.tenant, user=member.user, period=BudgetPeriod.MONTH)
    theirs = LlmBudgetFactory.create(tenant=outsider.tenant, period=BudgetPeriod.MONTH)

    def pks(params: dict[str, Any]) -> set[int]:
        return {budget.pk for budget in _listed(client, LlmBudget, params)}

    assert pks({"period__exact": "month"}) == {monthly.pk, theirs.pk}
    assert pks({"tenant__id__exact": member.tenant.pk}) == {daily.pk, monthly.pk}
    assert pks({"q": "other-test"}) == {theirs.pk}
    assert pks({"q": "member"}) == {monthly.pk}


# Budgets: the form


def _budget_post(client: Any, **fields: Any) -> Any:
    data = {"period": "day", "max_tokens": "", "max_cost": "", "note": "", "user": "", **fields}
    return client.post(admin_url(LlmBudget, "add"), data)


def _form_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted"
    return {field: list(errors) for field, errors in response.context["adminform"].form.errors.items()}


def test_an_operator_adds_a_budget_for_a_member(client, operator, member):
    response = _budget_post(
        client, tenant=member.tenant.pk, user=member.user.pk, period="month", max_cost="2.5", note="pilot"
    )
    assert response.status_code == 302
    budget = LlmBudget.objects.get()
    assert (budget.user, budget.period, budget.max_tokens, budget.max_cost) == (
        member.user,
        "month",
        None,
        Decimal("2.5"),
    )


def test_a_service_client_s_account_can_have_a_budget(client, operator, tenant):
    account = MembershipFactory.create(tenant=tenant, user=UserFactory.create(username="svc-etl")).user
    response = _budget_post(client, tenant=tenant.pk, user=account.pk, max_tokens="500")
    assert response.status_code == 302
    assert LlmBudget.objects.get().user == account


def test_another_tenant_s_member_is_refused_by_name(client, operator, member, outsider):
    response = _budget_post(client, tenant=member.tenant.pk, user=outsider.user.pk, max_tokens="5")
    errors = _form_errors(response)
    assert errors["user"] == [PERSON_NOT_MEMBER.format(username="outsider", tenant=member.tenant.slug)]
    assert not LlmBudget.objects.exists()


def test_a_budget_stays_in_its_tenant_whatever_tenant_is_posted(client, operator, member, outsider):
    budget = LlmBudgetFactory.create(tenant=member.tenant, user=member.user)
    response = client.post(
        admin_url(LlmBudget, "change", budget.pk),
        {"tenant": outsider.tenant.pk, "user": member.user.pk, "period": "day", "max_tokens": "5"},
    )
    assert response.status_code == 302
    budget.refresh_from_db()
    assert (budget.tenant, budget.max_tokens) == (member.tenant, 5)


def test_an_operators_budget_change_is_audited_with_their_name(client, operator, member):
    budget = LlmBudgetFactory.create(tenant=member.tenant, user=member.user, max_tokens=10)
    response = client.post(
        admin_url(LlmBudget, "change", budget.pk),
        {"user": member.user.pk, "period": "day", "max_tokens": "5", "note": "pilot"},
    )
    assert response.status_code == 302
    row = AuditEvent.objects.get(action=AuditAction.BUDGET_CHANGED)
    assert (row.user, row.tenant, row.detail["change"], row.detail["max_tokens"]) == (
        operator,
        member.tenant,
        "changed",
        5,
    )
    assert LlmBudget.objects.get().note == "pilot"


def test_an_operators_budget_removal_is_audited_with_their_name(client, operator, tenant):
    budget = LlmBudgetFactory.create(tenant=tenant)
    response = client.post(admin_url(LlmBudget, "delete", budget.pk), {"post": "yes"})
    assert response.status_code == 302
    assert not LlmBudget.objects.exists()
    row = AuditEvent.objects.get(action=AuditAction.BUDGET_CHANGED)
    assert (row.user, row.detail["change"]) == (operator, "removed")


def test_a_budget_without_any_limit_is_refused(client, operator, tenant):
    errors = _form_errors(_budget_post(client, tenant=tenant.pk))
    assert errors["__all__"] == ["Set a token limit, a cost limit, or both."]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", "-1"),
        ("max_cost", "-0.01"),
        ("max_tokens", str(2**63)),
        ("max_tokens", "1.5"),
        ("max_cost", "NaN"),
        ("max_cost", "Infinity"),
        ("max_cost", "1e400"),
        ("max_cost", "123456789.12345"),
    ],
)
def test_negative_huge_or_malformed_limits_are_refused_on_their_field(client, operator, tenant, field, value):
    errors = _form_errors(_budget_post(client, tenant=tenant.pk, **{field: value}))
    assert field in errors
    assert not LlmBudget.objects.exists()


def test_a_second_budget_for_the_same_tenant_or_person_and_period_is_a_form_error(client, operator, member):
    LlmBudgetFactory.create(tenant=member.tenant, period="day")
    LlmBudgetFactory.create(tenant=member.tenant, user=member.user, period="day")
    tenant_again = _form_errors(_budget_post(client, tenant=member.tenant.pk, max_tokens="1"))
    person_again = _form_errors(
        _budget_post(client, tenant=member.tenant.pk, user=member.user.pk, max_tokens="1")
    )
    assert tenant_again["__all__"] == ["This tenant already has a budget for this period."]
    assert person_again["__all__"] == ["This person already has a budget for this period."]
    assert _budget_post(client, tenant=member.tenant.pk, period="month", max_tokens="1").status_code == 302


def test_a_budget_saved_meanwhile_by_someone_else_is_a_form_error_not_a_server_error(
    client, operator, tenant, monkeypatch
):
    LlmBudgetFactory.create(tenant=tenant, period="day")
    checks = {"count": 0}
    real = LlmBudget.validate_constraints

    def late(self: LlmBudget, exclude: Any = None) -> None:
        # The first check ran before the other operator's budget was saved: it found nothing.
        checks["count"] += 1
        if checks["count"] > 1:
            real(self, exclude)

    monkeypatch.setattr(LlmBudget, "validate_constraints", late)
    errors = _form_errors(_budget_post(client, tenant=tenant.pk, max_tokens="7"))
    assert errors["__all__"] == ["This tenant already has a budget for this period."]
    assert checks["count"] == 2
    assert LlmBudget.objects.get().max_tokens == 10_000


def test_a_nul_in_the_note_is_refused_on_the_field(client, operator, tenant):
    errors = _form_errors(_budget_post(client, tenant=tenant.pk, max_tokens="1", note="a\x00b"))
    assert "note" in errors
    assert not LlmBudget.objects.exists()


def test_a_lone_surrogate_in_the_note_is_refused_on_the_field(tenant):
    form = LlmBudgetForm(data={"tenant": tenant.pk, "period": "day", "max_tokens": "1", "note": "a\ud800b"})
    assert not form.is_valid()
    assert form.errors["note"] == [
        NOTE_UNSTORABLE.format(reason="contains an unpaired surrogate (\\ud800), which is not valid Unicode")
    ]


def test_invalid_utf8_in_a_posted_note_is_stored_replaced_not_a_server_error(client, operator, tenant):
    body = f"tenant={tenant.pk}&period=day&max_tokens=1&user=&max_cost=&note=a%ED%A0%80%FFb".encode()
    response = client.post(
        admin_url(LlmBudget, "add"), body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 302
    assert LlmBudget.objects.get().note.startswith("a\ufffd")


# Usage records


def test_usage_records_list_every_column_for_an_operator(client, operator, member):
    application = ApplicationFactory.create(name="Notebook")
    LlmUsageFactory.create(
        membership=member,
        application=application,
        channel="mcp",
        provider="anthropic",
        model="claude-sonnet-4",
        total_tokens=1234,
        duration_ms=777,
        outcome=UsageOutcome.ERROR,
        error_code="provider_timeout",
    )
    response = client.get(admin_url(LlmUsage, "changelist"))
    page = response.content.decode()
    for text in ("Acme Test", "member", "Notebook", "mcp", "anthropic", "claude-sonnet-4", "1234", "777"):
        assert text in page
    assert "provider_timeout" in page
    assert "Failed" in page


def test_the_usage_list_totals_what_its_filters_select(client, operator, member):
    """Shown failing before: the list had no totals; an operator added up the cost column by hand."""
    for feature in ("ask_question", "ask_question", "summary"):
        LlmUsageFactory.create(membership=member, feature=feature, cost=Decimal("0.25"), total_tokens=100)
    LlmUsageFactory.create(membership=member, feature="summary", cost=None, total_tokens=40)
    LlmUsageFactory.create(membership=member, outcome=UsageOutcome.PENDING, total_tokens=9000)

    every = client.get(admin_url(LlmUsage, "changelist")).context["usage_totals"]
    asked = client.get(admin_url(LlmUsage, "changelist") + "?feature__exact=ask_question").context[
        "usage_totals"
    ]

    assert (every.calls, every.total_tokens, every.cost, every.unpriced_calls) == (4, 340, 0.75, 1)
    assert (asked.calls, asked.total_tokens, asked.cost) == (2, 200, 0.5)
    page = client.get(admin_url(LlmUsage, "changelist")).content.decode()
    assert "<strong>4</strong> calls" in page
    assert "1 calls had no price" in page


def test_the_usage_list_reads_people_clients_and_tenants_in_one_query(client, operator):
    LlmUsageFactory.create()
    url = admin_url(LlmUsage, "changelist")
    few = _queries(client, url)
    for _ in range(49):
        LlmUsageFactory.create()  # each with its own tenant, person and client
    assert len(_listed(client, LlmUsage)) == 50
    assert _queries(client, url) == few, "a query per row"


def test_usage_records_filter_by_tenant_provider_channel_outcome_and_date(client, operator, member, outsider):
    now = timezone.now()
    mine = LlmUsageFactory.create(membership=member, provider="openai", channel="api")
    refused = LlmUsageFactory.create(membership=member, outcome=UsageOutcome.REFUSED)
    by_mcp = LlmUsageFactory.create(membership=member, channel="mcp", provider="deepseek")
    old = usage_at(LlmUsageFactory.create(membership=member), now - timedelta(days=40))
    theirs = LlmUsageFactory.create(membership=outsider)

    def pks(params: dict[str, Any]) -> set[Any]:
        return {usage.pk for usage in _listed(client, LlmUsage, params)}

    assert pks({"tenant__id__exact": outsider.tenant.pk}) == {theirs.pk}
    assert pks({"provider": "deepseek"}) == {by_mcp.pk}
    assert pks({"channel": "mcp"}) == {by_mcp.pk}
    assert pks({"outcome__exact": "refused"}) == {refused.pk}
    since = (now - timedelta(days=7)).isoformat()
    assert old.pk not in pks({"created__gte": since})
    assert pks({"created__lt": since}) == {old.pk}
    assert pks({"created__year": old.created.year, "created__month": old.created.month}) >= {old.pk}
    assert mine.pk in pks({})


def test_usage_records_are_found_by_model_request_id_or_username(client, operator, member, outsider):
    by_model = LlmUsageFactory.create(membership=member, model="gemini/gemini-2.0-flash")
    by_request = LlmUsageFactory.create(membership=member, request_id="req-needle-42")
    by_person = LlmUsageFactory.create(membership=outsider)

    def pks(q: str) -> set[Any]:
        return {usage.pk for usage in _listed(client, LlmUsage, {"q": q})}

    assert pks("gemini-2.0") == {by_model.pk}
    assert pks("req-needle-42") == {by_request.pk}
    assert pks("outsider") == {by_person.pk}


def test_usage_records_cannot_be_added_changed_or_deleted(client, operator, member):
    usage = LlmUsageFactory.create(membership=member, model="gpt-4o-mini")
    assert client.get(admin_url(LlmUsage, "add")).status_code == 403
    changed = client.post(admin_url(LlmUsage, "change", usage.pk), {"model": "changed", "total_tokens": 0})
    assert changed.status_code == 403
    assert client.post(admin_url(LlmUsage, "delete", usage.pk), {"post": "yes"}).status_code == 403
    post_action(client, LlmUsage, "delete_selected", [usage])
    usage.refresh_from_db()
    assert (usage.model, usage.total_tokens) == ("gpt-4o-mini", 10)
    page = client.get(admin_url(LlmUsage, "change", usage.pk))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()


# Usage records as CSV


def _csv(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="llm-usage-')
    header, *rows = csv.reader(io.StringIO(b"".join(response.streaming_content).decode()))
    assert header == list(USAGE_CSV_COLUMNS)
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_the_export_link_exports_every_row_of_the_filtered_list(client, operator, member, outsider):
    application = ApplicationFactory.create(name="Backend job")
    wanted = [
        LlmUsageFactory.create(membership=member, provider="anthropic", application=application)
        for _ in range(30)
    ]
    LlmUsageFactory.create(membership=member, provider="openai")
    LlmUsageFactory.create(membership=outsider, provider="anthropic")
    query = f"?provider=anthropic&tenant__id__exact={member.tenant.pk}"

    page = client.get(admin_url(LlmUsage, "changelist") + query).content.decode()
    export_url = reverse(EXPORT) + query
    assert export_url.replace("&", "&amp;") in page

    rows = _csv(client.get(export_url))
    assert sorted(row["id"] for row in rows) == sorted(str(usage.pk) for usage in wanted)
    first = next(row for row in rows if row["id"] == str(wanted[0].pk))
    assert first == {
        **first,
        "tenant": "acme-test",
        "username": "member",
        "client": "Backend job",
        "client_id": application.client_id,
        "channel": "api",
        "provider": "anthropic",
        "total_tokens": "10",
        "cost": "0.00010000",
        "outcome": "ok",
        "structured": "false",
        "request_id": wanted[0].request_id,
    }


def test_the_export_follows_the_search_box(client, operator, member):
    LlmUsageFactory.create(membership=member, model="gpt-4o")
    found = LlmUsageFactory.create(membership=member, model="mistral-large")
    rows = _csv(client.get(reverse(EXPORT), {"q": "mistral"}))
    assert [row["id"] for row in rows] == [str(found.pk)]


def test_exporting_selected_records_writes_only_them(client, operator, member):
    chosen = LlmUsageFactory.create(membership=member)
    LlmUsageFactory.create(membership=member)
    response = client.post(
        admin_url(LlmUsage, "changelist"), {"action": "export_csv", "_selected_action": [chosen.pk]}
    )
    assert [row["id"] for row in _csv(response)] == [str(chosen.pk)]


def test_spreadsheet_formulas_in_exported_text_are_defused(client, operator):
    membership = MembershipFactory.create(user=UserFactory.create(username="@evil"))
    LlmUsageFactory.create(
        membership=membership,
        application=ApplicationFactory.create(name="+SUM(A1)"),
        model='=HYPERLINK("http://x")',
        request_id="-2+3",
        user=None,
    )
    LlmUsageFactory.create(membership=membership, model="ok", request_id="fine")
    rows = {row["request_id"]: row for row in _csv(client.get(reverse(EXPORT)))}
    assert rows["'-2+3"]["model"] == '\'=HYPERLINK("http://x")'
    assert rows["'-2+3"]["client"] == "'+SUM(A1)"
    assert rows["'-2+3"]["username"] == ""
    assert rows["fine"]["username"] == "'@evil"


# Who gets in


def test_non_staff_are_sent_to_the_login_from_the_lists_and_the_export(client):
    LlmUsageFactory.create()
    client.force_login(UserFactory.create(username="plain"))
    for url in (admin_url(LlmUsage, "changelist"), admin_url(LlmBudget, "changelist"), reverse(EXPORT)):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["location"].startswith("/admin/login/")


def test_staff_without_permissions_cannot_see_or_export_usage_or_budgets(client):
    LlmUsageFactory.create()
    client.force_login(UserFactory.create(username="junior", is_staff=True))
    assert client.get(reverse(EXPORT)).status_code == 403
    assert client.get(admin_url(LlmBudget, "add")).status_code == 403
    assert client.post(admin_url(LlmBudget, "add"), {"tenant": TenantFactory.create().pk}).status_code == 403


def test_the_admin_index_lists_budgets_and_usage_with_the_language_models(client, operator):
    apps = {app["name"]: app for app in client.get(reverse("admin:index")).context["app_list"]}
    assert {model["object_name"] for model in apps["Language models"]["models"]} == {
        "LanguageModel",
        "LlmBudget",
        "LlmUsage",
    }
    assert admin.site.is_registered(LlmBudget)

"""The console's models and budgets section, ``/console/<tenant>/models/``: the tenant's language
models (never their keys) and its budgets with what counts against each so far this period; its
admins add, change and remove both, and test a model with one tiny call through the governed path
(``language_models.model_test``: budgets and audit apply). Thin: each form is parsed
(``model_forms``) and handed to one service of ``language_models.services``; what a service
refuses comes back as this page with the form, its message beside the field, and its status."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET

from accounts.models import Membership
from core.errors import GatehouseError
from language_models.governed.budgets import budget_list_with_spending
from language_models.model_test import ModelTestResult, language_model_test
from language_models.models import LanguageModel
from language_models.selectors import language_model_get_for_tenant, llm_budget_get_for_tenant
from language_models.services import (
    language_model_delete,
    language_model_save,
    llm_budget_delete,
    llm_budget_save,
)
from portal.console.access import ConsoleTenant
from portal.console.changes import console_change
from portal.console.model_forms import BudgetForm, LanguageModelForm
from portal.console.pages import console_page, console_render

TEMPLATE = "console/models.html"
MODEL_SAVED = "{name} is saved."
MODEL_REMOVED = "{name} was removed."
BUDGET_SAVED = "The budget is saved."
BUDGET_REMOVED = "The budget was removed."


def _members(console: ConsoleTenant) -> QuerySet[Membership]:
    return Membership.objects.filter(tenant=console.tenant).select_related("user").order_by("user__username")


def _budget_form(console: ConsoleTenant, data: Any, **kwargs: Any) -> BudgetForm:
    return BudgetForm(data, tenant=console.tenant, members=_members(console), **kwargs)


def _model_initial(language_model: LanguageModel) -> dict[str, Any]:
    return {
        "model_id": language_model.pk,
        "name": language_model.name,
        "model": language_model.model,
        "is_default": language_model.is_default,
        "input_price_per_million": language_model.input_price_per_million,
        "output_price_per_million": language_model.output_price_per_million,
    }


def _page(
    request: HttpRequest,
    console: ConsoleTenant,
    *,
    model_form: LanguageModelForm | None = None,
    budget_form: BudgetForm | None = None,
    error: str = "",
    tested: tuple[LanguageModel, ModelTestResult] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "models": LanguageModel.objects.filter(tenant=console.tenant).order_by("name"),
        "budgets": budget_list_with_spending(tenant_id=console.tenant.pk),
        "model_form": model_form or LanguageModelForm(),
        "budget_form": budget_form or _budget_form(console, None),
        "error": error,
        "tested": tested,
    }
    return console_render(request, console, TEMPLATE, context, status=status)


@require_GET
@console_page
def models(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    """The section; ``?model=<id>`` or ``?budget=<id>`` fills its form in to change that one."""
    model_form = budget_form = None
    if "model" in request.GET:
        chosen = language_model_get_for_tenant(tenant=console.tenant, model_id=request.GET["model"])
        model_form = LanguageModelForm(initial=_model_initial(chosen))
    if "budget" in request.GET:
        budget = llm_budget_get_for_tenant(tenant=console.tenant, budget_id=request.GET["budget"])
        initial = {
            "budget_id": budget.pk,
            "person": budget.user_id or "",
            "period": budget.period,
            "max_tokens": budget.max_tokens,
            "max_cost": budget.max_cost,
        }
        budget_form = _budget_form(console, None, initial=initial)
    return _page(request, console, model_form=model_form, budget_form=budget_form)


@console_change(page=_page)
def model_save(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    form = LanguageModelForm(request.POST)
    if not form.is_valid():
        return _page(request, console, model_form=form, status=422)
    data = form.cleaned_data
    try:
        saved = language_model_save(
            by=console.person,
            tenant=console.tenant,
            model_id=data["model_id"] or None,
            name=data["name"],
            model=data["model"],
            api_key=data["api_key"],
            remove_api_key=data["remove_api_key"],
            is_default=data["is_default"],
            input_price_per_million=data["input_price_per_million"],
            output_price_per_million=data["output_price_per_million"],
        )
    except GatehouseError as error:
        return _refused(request, console, error, model_form=form)
    messages.success(request, MODEL_SAVED.format(name=saved.name))
    return redirect("console:models", slug=console.tenant.slug)


@console_change(page=_page)
def model_remove(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    removed = language_model_delete(
        by=console.person, tenant=console.tenant, model_id=request.POST.get("model_id", "")
    )
    messages.success(request, MODEL_REMOVED.format(name=removed.name))
    return redirect("console:models", slug=console.tenant.slug)


@console_change(page=_page)
def model_test(request: HttpRequest, console: ConsoleTenant, model_id: int) -> HttpResponse:
    """One tiny call of the model; its answer, or why there was none, shown on the page."""
    chosen = language_model_get_for_tenant(tenant=console.tenant, model_id=model_id)
    result = language_model_test(model=chosen, by=console.person)
    return _page(request, console, tested=(chosen, result))


@console_change(page=_page)
def budget_save(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    form = _budget_form(console, request.POST)
    if not form.is_valid():
        return _page(request, console, budget_form=form, status=422)
    data = form.cleaned_data
    try:
        llm_budget_save(
            by=console.person,
            tenant=console.tenant,
            budget_id=data["budget_id"] or None,
            period=data["period"],
            max_tokens=data["max_tokens"],
            max_cost=data["max_cost"],
            person_id=form.person_id(),
        )
    except GatehouseError as error:
        return _refused(request, console, error, budget_form=form)
    messages.success(request, BUDGET_SAVED)
    return redirect("console:models", slug=console.tenant.slug)


@console_change(page=_page)
def budget_remove(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    llm_budget_delete(by=console.person, tenant=console.tenant, budget_id=request.POST.get("budget_id", ""))
    messages.success(request, BUDGET_REMOVED)
    return redirect("console:models", slug=console.tenant.slug)


def _refused(
    request: HttpRequest, console: ConsoleTenant, error: GatehouseError, **forms: Form | None
) -> HttpResponse:
    """The page again with what a service refused: beside the field it names, else above the forms."""
    field = (error.data or {}).get("field")
    form = next((form for form in forms.values() if form is not None), None)
    if form is not None and field in form.fields:
        form.add_error(field, error.message)
        return _page(request, console, status=error.http_status, **forms)  # type: ignore[arg-type]
    return _page(request, console, error=error.message, status=error.http_status, **forms)  # type: ignore[arg-type]


# Included by portal.console.urls beside the section's other addresses.
urlpatterns: list[URLPattern] = [
    path("<slug:slug>/models/<int:model_id>/test/", model_test, name="model-test"),
]

"""Factories for the LLM gateway's budgets and usage records (person, tenant and client agree), and
the admin's language model form as an operator fills it in."""

from __future__ import annotations

import secrets
from datetime import datetime
from decimal import Decimal

import factory

from accounts.models import Tenant
from language_models.models import BudgetPeriod, LlmBudget, LlmUsage, UsageOutcome
from tests.support.factories import ApplicationFactory, MembershipFactory, TenantFactory


class LlmBudgetFactory(factory.django.DjangoModelFactory[LlmBudget]):
    """A whole-tenant daily token budget; pass ``user`` (a member of ``tenant``) for a person's."""

    class Meta:
        model = LlmBudget

    tenant = factory.SubFactory(TenantFactory)
    user = None
    period = BudgetPeriod.DAY
    max_tokens = 10_000
    max_cost = None


class LlmUsageFactory(factory.django.DjangoModelFactory[LlmUsage]):
    """One answered REST call by a member of a tenant through a client."""

    class Meta:
        model = LlmUsage
        exclude = ("membership",)

    membership = factory.SubFactory(MembershipFactory)
    tenant = factory.LazyAttribute(lambda o: o.membership.tenant)
    user = factory.LazyAttribute(lambda o: o.membership.user)
    application = factory.SubFactory(ApplicationFactory)
    channel = "api"
    provider = "openai"
    model = "gpt-4o-mini"
    key_source = "stored"
    prompt_tokens = 7
    completion_tokens = 3
    total_tokens = 10
    cost = Decimal("0.0001")
    duration_ms = 120
    outcome = UsageOutcome.OK
    request_id = factory.LazyFunction(lambda: secrets.token_hex(8))


def usage_at(usage: LlmUsage, when: datetime) -> LlmUsage:
    """``created`` is set on insert; tests move a record in time afterwards."""
    LlmUsage.objects.filter(pk=usage.pk).update(created=when)
    usage.refresh_from_db()
    return usage


def model_form(tenant: Tenant, **overrides: object) -> dict[str, object]:
    """The admin's add form for ``tenant``'s default model, as posted; ``overrides`` change fields."""
    return {
        "tenant": tenant.pk,
        "name": "Main",
        "model": "openai/gpt-4o-mini",
        "api_key": "",
        "api_base": "",
        "is_default": "on",
        "temperature": "0",
        "max_output_tokens": "2000",
        "request_timeout_seconds": "60",
        **overrides,
    }

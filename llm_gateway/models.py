"""What the LLM gateway keeps: each tenant's budgets and one usage record per call.

A budget caps tokens and/or cost per UTC day or month, for the whole tenant or for one person (or
service client, whose account is a person of the tenant too). Usage records are what budgets are
summed from, what operators filter and export, and what the Prometheus counters mirror.
Neither holds a prompt, an answer or a key.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from accounts.models import Tenant
from llm_gateway import scopes  # noqa: F401  (registers the scope with the app)


class BudgetPeriod(models.TextChoices):
    DAY = "day", "Per day (UTC)"
    MONTH = "month", "Per month (UTC)"


class LlmBudget(models.Model):
    """A cap on a tenant's (or one person's) language model use in a period; either limit may be blank."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="llm_budgets")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="llm_budgets",
        help_text="Only this person (or service client). Empty: the whole tenant together.",
    )
    period = models.CharField(max_length=10, choices=BudgetPeriod.choices, default=BudgetPeriod.DAY)
    max_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, validators=[MinValueValidator(0)], help_text="Prompt and completion tokens."
    )
    max_cost = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="US dollars, as litellm prices each call.",
    )
    note = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "period", "user__username"]
        verbose_name = "LLM budget"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "period"],
                condition=models.Q(user__isnull=True),
                name="llm_budget_one_per_tenant_period",
                violation_error_message="This tenant already has a budget for this period.",
            ),
            models.UniqueConstraint(
                fields=["tenant", "user", "period"],
                condition=models.Q(user__isnull=False),
                name="llm_budget_one_per_person_period",
                violation_error_message="This person already has a budget for this period.",
            ),
            models.CheckConstraint(
                condition=models.Q(max_tokens__isnull=False) | models.Q(max_cost__isnull=False),
                name="llm_budget_has_a_limit",
                violation_error_message="Set a token limit, a cost limit, or both.",
            ),
            models.CheckConstraint(
                condition=models.Q(max_cost__isnull=True) | models.Q(max_cost__gte=0),
                name="llm_budget_cost_not_negative",
            ),
        ]

    def __str__(self) -> str:
        who = self.user.username if self.user_id and self.user else "whole tenant"
        return f"{self.tenant.slug}, {who}, per {self.period}"


class UsageOutcome(models.TextChoices):
    OK = "ok", "Answered"
    ERROR = "error", "Failed"
    REFUSED = "refused", "Refused (budget, input)"


class LlmUsage(models.Model):
    """One call through the gateway (REST or MCP), answered or not. Its id is the call's ``id``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The OAuth client that called.",
    )
    channel = models.CharField(max_length=10, help_text="api (REST) or mcp (the llm_invoke tool).")
    provider = models.CharField(max_length=50)
    model = models.CharField(max_length=200)
    key_source = models.CharField(max_length=20, blank=True, help_text="stored, header or environment.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=10, choices=UsageOutcome.choices)
    error_code = models.CharField(max_length=50, blank=True, help_text="The API's error code, if any.")
    structured = models.BooleanField(default=False, help_text="A response schema was asked for.")
    request_id = models.CharField(max_length=128, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = "LLM usage record"
        indexes = [
            models.Index(fields=["tenant", "created"], name="llm_usage_tenant_created"),
            models.Index(fields=["tenant", "user", "created"], name="llm_usage_person_created"),
        ]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} ({self.outcome})"

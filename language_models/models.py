"""Each tenant's configured language models, its budgets, and one usage record per model call.

Every model call of the platform goes through ``language_models.governed``, which checks the
budgets before the call and writes its usage record; the records are what budgets are summed from,
what operators filter and export, and what ``GET /api/v1/usage`` totals. Nothing here holds a
prompt, an answer or a key in clear.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from accounts.models import Tenant

MODEL_HELP = (
    "A litellm model string: provider/model, such as openai/gpt-4o-mini, "
    "anthropic/claude-sonnet-4-5 or ollama/llama3."
)
API_BASE_HELP = (
    "Only for a self-hosted or proxied endpoint (Ollama, vLLM, Azure); blank for the provider's own."
)
IS_DEFAULT_HELP = "The model this tenant's questions use. At most one per tenant."
MODEL_MAX_LENGTH = 200
PRICE_HELP = (
    "US dollars per million {direction} tokens. Blank: litellm's own price, when it knows the model. "
    "When set, it is used instead of litellm's."
)


class LanguageModel(models.Model):
    """A model a tenant's LLM calls go to. The API key is stored Fernet-encrypted only."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="language_models")
    name = models.CharField(max_length=100, help_text="A label for operators, unique in the tenant.")
    model = models.CharField(max_length=MODEL_MAX_LENGTH, help_text=MODEL_HELP)
    api_key_encrypted = models.TextField(blank=True, editable=False)
    api_base = models.URLField(blank=True, verbose_name="API base URL", help_text=API_BASE_HELP)
    is_default = models.BooleanField(default=False, help_text=IS_DEFAULT_HELP)
    temperature = models.FloatField(default=0, validators=[MinValueValidator(0), MaxValueValidator(2)])
    max_output_tokens = models.PositiveIntegerField(default=2000, validators=[MinValueValidator(1)])
    request_timeout_seconds = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(1), MaxValueValidator(600)]
    )
    input_price_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text=PRICE_HELP.format(direction="input (prompt)"),
    )
    output_price_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text=PRICE_HELP.format(direction="output (completion)"),
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="language_model_name_unique"),
            models.UniqueConstraint(
                fields=["tenant"],
                condition=models.Q(is_default=True),
                name="language_model_one_default_per_tenant",
                violation_error_message="This tenant already has a default language model.",
            ),
            # The validators guard the admin form; these guard every other writer.
            models.CheckConstraint(
                condition=models.Q(temperature__gte=0, temperature__lte=2),
                name="language_model_temperature_range",
            ),
            models.CheckConstraint(
                condition=models.Q(max_output_tokens__gte=1), name="language_model_max_output_tokens_min"
            ),
            models.CheckConstraint(
                condition=models.Q(request_timeout_seconds__gte=1, request_timeout_seconds__lte=600),
                name="language_model_timeout_range",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(input_price_per_million__isnull=True) | models.Q(input_price_per_million__gte=0)
                )
                & (
                    models.Q(output_price_per_million__isnull=True)
                    | models.Q(output_price_per_million__gte=0)
                ),
                name="language_model_prices_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


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
        help_text="US dollars: the model's price set by an operator, else litellm's.",
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
    REFUSED = "refused", "Refused (budget, rate limit, input)"
    # Started and not yet ended: its tokens and cost are the call's reservation (language_models.governed).
    PENDING = "pending", "In flight"


class Feature(models.TextChoices):
    """What asked for a model call: every caller of ``language_models.governed`` names one."""

    ASK_QUESTION = "ask_question", "ask_question (data agent)"
    INVOKE_AGENT = "invoke_agent", "invoke_agent (workflows)"
    INVOKE_ASSISTANT = "invoke_assistant", "invoke_assistant (workflows)"
    SUMMARY = "summary", "Conversation summary"
    API = "api", "POST /api/v1/llm/invoke"
    LLM_INVOKE = "llm_invoke", "llm_invoke (MCP tool)"
    MODEL_TEST = "model_test", "Test call (admin or console)"


class LlmUsage(models.Model):
    """One model call, answered or not. For the LLM gateway, its id is the call's ``id``."""

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
    feature = models.CharField(max_length=30, choices=Feature.choices, default=Feature.API)
    channel = models.CharField(max_length=10, help_text="api (REST), mcp (a tool) or admin.")
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

"""Each tenant's configured language models: the one every LLM call in the product uses."""

from __future__ import annotations

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
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"

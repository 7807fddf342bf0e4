"""Which language model a tenant's LLM calls use, with its key decrypted for the call."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from accounts.models import Tenant
from core.crypto import secret_decrypt
from core.errors import NotFound, NotReady, Unavailable
from language_models.models import LanguageModel, LlmBudget

NO_MODEL_CONFIGURED = (
    "No language model is configured for this tenant, so questions cannot be answered. An operator "
    "can add one in the admin (Language models); run_query works without one."
)
NO_DEFAULT_MODEL = (
    "This tenant has several language models and none is marked as the default, so questions cannot "
    "be answered. An operator can mark one as the default in the admin (Language models); run_query "
    "works without one."
)

KEY_UNDECRYPTABLE = (
    "The language model's stored API key cannot be decrypted with the current encryption key. "
    "An operator must enter it again in the admin (Language models)."
)
MODEL_NOT_FOUND = "No such language model in this tenant."
BUDGET_NOT_FOUND = "No such budget in this tenant."


class NoModelConfigured(NotReady):
    def __init__(self, message: str = NO_MODEL_CONFIGURED) -> None:
        super().__init__(message, data={"reason": "no_model_configured"})


@dataclass(frozen=True)
class ModelConfig:
    """Everything one LLM call needs. The key stays out of ``repr`` (and so out of logs and tracebacks)."""

    model: str
    api_key: str | None = field(repr=False)
    api_base: str | None
    temperature: float
    max_output_tokens: int
    timeout_seconds: float
    # Where the key came from: "stored" (the admin), "header" (the caller's, for one call) or
    # "environment" (the server's variables); it picks the message when the provider refuses it.
    key_source: str = "stored"
    # An operator's prices (US dollars per million tokens), used instead of litellm's when set.
    input_price_per_million: Decimal | None = None
    output_price_per_million: Decimal | None = None

    @classmethod
    def from_language_model(cls, language_model: LanguageModel) -> ModelConfig:
        api_key = None
        if language_model.api_key_encrypted:
            try:
                api_key = secret_decrypt(token=language_model.api_key_encrypted)
            except ValueError:
                raise Unavailable(KEY_UNDECRYPTABLE, data={"reason": "llm_key_undecryptable"}) from None
        return cls(
            model=language_model.model,
            api_key=api_key,
            api_base=language_model.api_base or None,
            temperature=language_model.temperature,
            max_output_tokens=language_model.max_output_tokens,
            timeout_seconds=float(language_model.request_timeout_seconds),
            key_source="stored" if api_key else "environment",
            input_price_per_million=language_model.input_price_per_million,
            output_price_per_million=language_model.output_price_per_million,
        )


def language_model_for_tenant(*, tenant_id: int) -> ModelConfig:
    """The tenant's default model, else its only one; NoModelConfigured otherwise.

    Synchronous ORM: async callers wrap it with ``core.db.db_call``.
    """
    default = LanguageModel.objects.filter(tenant_id=tenant_id, is_default=True).first()
    if default is not None:
        return ModelConfig.from_language_model(default)
    # Two rows are enough to tell "exactly one" from "several".
    candidates = list(LanguageModel.objects.filter(tenant_id=tenant_id).order_by("pk")[:2])
    if len(candidates) == 1:
        return ModelConfig.from_language_model(candidates[0])
    raise NoModelConfigured(NO_DEFAULT_MODEL if candidates else NO_MODEL_CONFIGURED)


def language_model_get_for_tenant(*, tenant: Tenant, model_id: object) -> LanguageModel:
    """``tenant``'s model ``model_id`` (as posted: any text); ``NotFound`` for another tenant's, a
    removed one or an id that is none."""
    pk = _id(model_id)
    found = LanguageModel.objects.filter(tenant=tenant, pk=pk).first() if pk else None
    if found is None:
        raise NotFound(MODEL_NOT_FOUND)
    return found


def llm_budget_get_for_tenant(*, tenant: Tenant, budget_id: object) -> LlmBudget:
    """``tenant``'s budget ``budget_id``; ``NotFound`` as ``language_model_get_for_tenant``."""
    pk = _id(budget_id)
    found = LlmBudget.objects.select_related("user").filter(tenant=tenant, pk=pk).first() if pk else None
    if found is None:
        raise NotFound(BUDGET_NOT_FOUND)
    return found


def _id(value: object) -> int | None:
    # A primary key as a form posts it; anything else (a megabyte, "1e9", "-1") finds nothing.
    text = str(value)
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None

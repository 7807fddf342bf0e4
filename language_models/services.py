"""Writes to a tenant's language models."""

from __future__ import annotations

from django.db import transaction

from accounts.models import Tenant
from language_models.models import LanguageModel


@transaction.atomic
def language_model_ensure_default(*, tenant: Tenant, name: str, model: str) -> LanguageModel:
    """Create or update the tenant's model called ``name`` and make it the default.

    Its stored API key, if any, is kept; without one, litellm reads the provider's usual
    environment variable (OPENAI_API_KEY, ANTHROPIC_API_KEY...).
    """
    # The previous default steps down first: the database allows one default per tenant.
    LanguageModel.objects.filter(tenant=tenant, is_default=True).exclude(name=name).update(is_default=False)
    language_model, _ = LanguageModel.objects.update_or_create(
        tenant=tenant, name=name, defaults={"model": model, "is_default": True}
    )
    return language_model

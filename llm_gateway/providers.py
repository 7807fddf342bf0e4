"""The provider table a caller reads before calling (``GET /api/v1/providers``, and the MCP tool's
description of what it can reach).

Five providers are always listed (the gateway specification's), plus every provider of the tenant's
configured models. What each can do comes from litellm (``llm_gateway.capabilities``), asked about
the tenant's configured model on it, else a representative model. ``available`` is this tenant's
and this request's: computed on every call, never at import, by the same rules as the call itself
(``llm_gateway.resolution``): a stored key on the provider, a configured model that works from the
server's environment or needs no key, or a key in ``X-Provider-Api-Key`` now.
"""

from __future__ import annotations

import asyncio

from core.db import db_call
from core.errors import NotReady
from core.identity import Identity
from language_models.model_checks import language_model_key_check, litellm_import
from language_models.models import LanguageModel
from llm_gateway.capabilities import EMULATED_JSON_MODE, model_json_mode, model_structured_output
from llm_gateway.resolution import (
    KEYLESS_PROVIDERS,
    header_key_check,
    language_model_provider,
    tenant_language_models,
)
from llm_gateway.schemas import ProviderInfo, ProvidersResponse

# A model litellm knows well on each always-listed provider, to ask it about the provider.
REPRESENTATIVE_MODELS = {
    "openai": "openai/gpt-4o-mini",
    "anthropic": "anthropic/claude-sonnet-4-5",
    "deepseek": "deepseek/deepseek-chat",
    "gemini": "gemini/gemini-2.5-flash",
    "ollama": "ollama/llama3",
}


async def llm_providers_list(*, identity: Identity, header_key: str | None) -> ProvidersResponse:
    """The providers this tenant can see, with what they support and whether it can call them now."""
    await asyncio.to_thread(litellm_import)
    return await db_call(_providers_list, tenant_id=identity.tenant_id, header_key=header_key)


def _providers_list(*, tenant_id: int, header_key: str | None) -> ProvidersResponse:
    key = header_key_check(header_key=header_key)
    configured: dict[str, list[LanguageModel]] = {}
    for language_model in tenant_language_models(tenant_id=tenant_id):
        provider = language_model_provider(language_model=language_model)
        if provider is not None:
            configured.setdefault(provider, []).append(language_model)
    ids = [*REPRESENTATIVE_MODELS, *sorted(set(configured) - set(REPRESENTATIVE_MODELS))]
    return ProvidersResponse(
        providers=[
            _provider_info(provider=provider, models=configured.get(provider, []), header_key=key)
            for provider in ids
        ]
    )


def _provider_info(*, provider: str, models: list[LanguageModel], header_key: str | None) -> ProviderInfo:
    asked = [lm.model for lm in models] or [REPRESENTATIVE_MODELS[provider]]
    names = list(dict.fromkeys(lm.model.removeprefix(f"{provider}/") for lm in models))
    return ProviderInfo(
        id=provider,
        json_mode=provider in EMULATED_JSON_MODE
        or any(model_json_mode(provider=provider, model=model) for model in asked),
        structured_output=any(model_structured_output(provider=provider, model=model) for model in asked),
        available=_available(provider=provider, models=models, header_key=header_key),
        models=names or None,
    )


def _available(*, provider: str, models: list[LanguageModel], header_key: str | None) -> bool:
    if header_key is not None and provider not in KEYLESS_PROVIDERS:
        return True
    for language_model in models:
        if language_model.api_key_encrypted:
            return True
        try:
            language_model_key_check(
                model=language_model.model,
                provider=provider,
                api_key=None,
                api_base=language_model.api_base or None,
            )
        except NotReady:
            continue
        return True
    return False

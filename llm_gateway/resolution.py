"""Which model and key a gateway call uses: the caller names a provider and a model, the tenant's
configuration decides everything else.

In order:

1. A configured model of the tenant (the language models admin) whose model string is
   ``provider/model``, or whose name is ``model`` on that provider: its key, endpoint and timeout.
2. Any other model on the provider, with a key the tenant stored for that provider (its default
   model's first, then the most recently updated): the key and its endpoint go together, so a key
   kept for a proxy is sent to that proxy, not to the provider. Keyless self-hosted providers
   (Ollama, vLLM) need a configured endpoint: without one litellm would call the server's own
   localhost.
3. Nothing else. Never another tenant's key, and never the server's environment for a model the
   tenant has not configured: the operator's keys pay for what operators chose.

A key in ``X-Provider-Api-Key`` (``header_key``) replaces the stored one for this call only; it is
never stored or logged (``ModelConfig`` keeps it out of ``repr``). The caller's ``temperature`` and
``max_tokens`` replace the configuration's.

Synchronous (ORM, litellm's provider table): async callers use ``core.db.db_call`` after litellm has
been imported in a thread.
"""

from __future__ import annotations

import dataclasses
import re

from core.errors import InvalidInput, NotReady
from language_models.model_checks import ModelStringInvalid, language_model_string_validate, litellm_import
from language_models.models import LanguageModel
from language_models.selectors import ModelConfig

PROVIDER_UNKNOWN = (
    "provider {provider!r} is not one litellm knows (such as openai, anthropic, deepseek, gemini, ollama)."
)
MODEL_INVALID = "model is not a model name litellm can route on {provider}."
HEADER_KEY_INVALID = "X-Provider-Api-Key must be 1 to {limit} printable ASCII characters without spaces."
PROVIDER_NOT_CONFIGURED = (
    "No API key for {provider} is configured for this tenant: an operator can add a model on "
    "{provider} with its key in the admin (Language models), or send one in X-Provider-Api-Key."
)
KEYLESS_NOT_CONFIGURED = (
    "{provider} runs on a server of the tenant's own, and none is configured: an operator can add a "
    "model on {provider} with its API base URL in the admin (Language models)."
)

# Self-hosted servers that take no key, where litellm's default endpoint is the local host.
KEYLESS_PROVIDERS = frozenset({"ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile"})
MAX_HEADER_KEY_LENGTH = 4096
_HEADER_KEY = re.compile(r"[\x21-\x7e]+")


def provider_known(*, provider: str) -> bool:
    litellm = litellm_import()
    return provider in {str(getattr(known, "value", known)) for known in litellm.provider_list}


def language_model_provider(*, language_model: LanguageModel) -> str | None:
    """The provider litellm routes a configured model to; None for a string it cannot route."""
    try:
        return language_model_string_validate(
            model=language_model.model, api_base=language_model.api_base or None
        )
    except ModelStringInvalid:
        return None


def tenant_language_models(*, tenant_id: int) -> list[LanguageModel]:
    """The tenant's configured models, default first, then the most recently updated."""
    return list(LanguageModel.objects.filter(tenant_id=tenant_id).order_by("-is_default", "-updated", "-pk"))


def header_key_check(*, header_key: str | None) -> str | None:
    """The caller's key, or None when none was given; ``InvalidInput`` for one that cannot be a key.

    The message never repeats it.
    """
    if header_key is None or header_key == "":
        return None
    if len(header_key) > MAX_HEADER_KEY_LENGTH or not _HEADER_KEY.fullmatch(header_key):
        raise InvalidInput(
            HEADER_KEY_INVALID.format(limit=MAX_HEADER_KEY_LENGTH), data={"field": "X-Provider-Api-Key"}
        )
    return header_key


def gateway_model_resolve(
    *,
    tenant_id: int,
    provider: str,
    model: str,
    header_key: str | None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> ModelConfig:
    """The configuration for one call to ``model`` on ``provider`` (see the module docstring).

    ``InvalidInput`` for an unknown provider or unroutable model; ``NotReady`` when the tenant has no
    key for the provider and the caller gave none.
    """
    if not provider_known(provider=provider):
        raise InvalidInput(PROVIDER_UNKNOWN.format(provider=provider), data={"field": "provider"})
    key = header_key_check(header_key=header_key)
    model_string = model if model.startswith(f"{provider}/") else f"{provider}/{model}"
    configured = tenant_language_models(tenant_id=tenant_id)
    on_provider = [lm for lm in configured if language_model_provider(language_model=lm) == provider]
    chosen = next((lm for lm in on_provider if lm.model == model_string), None) or next(
        (lm for lm in on_provider if lm.name == model), None
    )
    if chosen is not None:
        config = ModelConfig.from_language_model(chosen)
        if key is not None:
            config = dataclasses.replace(config, api_key=key, key_source="header")
    else:
        config = _unconfigured_model(
            provider=provider, model_string=model_string, key=key, donors=on_provider
        )
    if temperature is not None:
        config = dataclasses.replace(config, temperature=temperature)
    if max_tokens is not None:
        config = dataclasses.replace(config, max_output_tokens=max_tokens)
    return config


def _unconfigured_model(
    *, provider: str, model_string: str, key: str | None, donors: list[LanguageModel]
) -> ModelConfig:
    try:
        routed = language_model_string_validate(model=model_string)
    except ModelStringInvalid:
        raise InvalidInput(MODEL_INVALID.format(provider=provider), data={"field": "model"}) from None
    if routed != provider:
        raise InvalidInput(MODEL_INVALID.format(provider=provider), data={"field": "model"})
    donor: LanguageModel | None
    if provider in KEYLESS_PROVIDERS:
        donor = next((lm for lm in donors if lm.api_base), None)
        if donor is None:
            raise NotReady(
                KEYLESS_NOT_CONFIGURED.format(provider=provider),
                data={"reason": "llm_not_configured", "provider": provider},
            )
    else:
        donor = next((lm for lm in donors if lm.api_key_encrypted), None)
        if donor is None and key is None:
            raise NotReady(
                PROVIDER_NOT_CONFIGURED.format(provider=provider),
                data={"reason": "llm_not_configured", "provider": provider},
            )
    # The admin's defaults for a new model, read from an unsaved row.
    defaults = LanguageModel()
    if key is not None and provider not in KEYLESS_PROVIDERS:
        # The caller's own key, for the provider's own endpoint: never sent to a tenant's proxy.
        return ModelConfig(
            model=model_string,
            api_key=key,
            api_base=None,
            temperature=defaults.temperature,
            max_output_tokens=defaults.max_output_tokens,
            timeout_seconds=float(
                donor.request_timeout_seconds if donor else defaults.request_timeout_seconds
            ),
            key_source="header",
        )
    assert donor is not None
    stored = ModelConfig.from_language_model(donor)
    return ModelConfig(
        model=model_string,
        api_key=key or stored.api_key,
        api_base=stored.api_base,
        temperature=defaults.temperature,
        max_output_tokens=defaults.max_output_tokens,
        timeout_seconds=stored.timeout_seconds,
        key_source="header" if key else "stored",
    )

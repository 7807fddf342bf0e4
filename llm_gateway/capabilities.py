"""What a provider's model can be asked for: JSON-only output, and output held to a JSON Schema.

litellm knows this for the models in its own map (``supports_response_schema``, and whether the
provider takes ``response_format`` at all); we ask it rather than keep a table that would age.
One exception is ours: DeepSeek's JSON mode is emulated (an instruction, then a lenient parse), as
the gateway specification asks, and its output is never held to a schema by the provider.

litellm's map does not change while the process runs, so answers are cached. litellm must have been
imported already (``language_models.model_checks.litellm_import``, in a thread from async code).
"""

from __future__ import annotations

import functools

from language_models.model_checks import litellm_import

# Providers whose JSON mode the gateway emulates, never asking the provider for it.
EMULATED_JSON_MODE = frozenset({"deepseek"})


@functools.lru_cache(maxsize=1024)
def model_structured_output(*, provider: str, model: str) -> bool:
    """The provider enforces a JSON Schema on this model's output (``model``: a litellm string)."""
    if provider in EMULATED_JSON_MODE:
        return False
    litellm = litellm_import()
    try:
        return bool(litellm.supports_response_schema(model=model, custom_llm_provider=provider))
    except Exception:
        # A model litellm has never heard of: assume not, and emulate.
        return False


@functools.lru_cache(maxsize=1024)
def model_json_mode(*, provider: str, model: str) -> bool:
    """The provider takes ``response_format={"type": "json_object"}`` for this model."""
    if provider in EMULATED_JSON_MODE:
        return False
    litellm = litellm_import()
    name = model.removeprefix(f"{provider}/")
    try:
        params = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider) or []
    except Exception:
        return False
    return "response_format" in params

"""What litellm knows about a model string, asked before any call: is it one, and is its key there?

Both checks are local (no network), so a bad model or a missing key fails at once, with a message
saying what to fix, rather than after the provider's SDK has tried, retried and answered with an
error that names neither. ``preflight`` (for ``DEMO_LLM_MODEL``), the admin form and
``llm_complete`` all ask here, so the operator reads the same message wherever the mistake shows.

What is deliberately not checked: whether litellm's catalog (``litellm.model_cost``) lists the model.
The catalog is the snapshot bundled with the installed litellm (settings keep litellm from fetching
a newer one), so it lags every new release, and many providers take names no catalog can list
(``openai/<anything>`` for an OpenAI-compatible server, ``ollama/``, ``hosted_vllm/``, Azure
deployment names, Bedrock ARNs, fine-tuned ``ft:`` ids). The provider itself is the authority on
its models: its "not found" comes back as ``LLM_MODEL_NOT_FOUND`` (``language_models.completion``).
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
from types import ModuleType
from typing import Any

from core.errors import NotReady
from language_models.models import MODEL_MAX_LENGTH

MODEL_STRING_EMPTY = (
    "The language model is empty: give a litellm model string, provider/model, such as "
    "openai/gpt-4o-mini, anthropic/claude-sonnet-4-5 or ollama/llama3."
)
MODEL_STRING_TOO_LONG = (
    "The language model is {length} characters long; a litellm model string has at most {limit}."
)
MODEL_STRING_BAD_CHARACTERS = (
    "The language model {model} contains spaces, control or non-ASCII characters; a litellm model "
    "string has none (such as openai/gpt-4o-mini)."
)
MODEL_STRING_UNKNOWN_PROVIDER = (
    "The language model {model} names no provider litellm knows{hint}: write provider/model, such as "
    "openai/gpt-4o-mini, anthropic/claude-sonnet-4-5 or ollama/llama3."
)
MODEL_STRING_NO_NAME = "The language model {model} names the provider {provider} but no model after it."
UNKNOWN_PROVIDER_HINT = " (did you mean {provider}/?)"
LLM_MISSING_KEY = (
    "Missing API key for {provider}: set {variables} or enter it in the admin (Language models)."
)

# Printable ASCII without the space: every litellm model string (provider/name, Ollama tags, Bedrock
# ARNs, fine-tuned ids) fits, and nothing that could end a log line or a URL path segment early does.
_MODEL_CHARACTERS = re.compile(r"[\x21-\x7e]+")
# How much of a refused string a message repeats: enough to recognise it, never a megabyte.
_SHOWN_CHARACTERS = 80
# validate_environment lists base URLs, regions and projects too; only these are API keys. The
# others have defaults or other sources (Ollama's localhost, AWS roles, Google's ADC) it cannot see.
_KEY_SUFFIXES = ("_API_KEY", "_API_TOKEN")
# Credentials validate_environment does not model, so its "missing" would refuse a working setup:
# Azure also reads AZURE_OPENAI_API_KEY and Entra ID tokens; Anthropic also takes workload identity
# federation. For these the provider's own answer is the check.
_OTHER_CREDENTIALS: dict[str, tuple[str, ...] | None] = {
    "azure": None,
    "anthropic": ("ANTHROPIC_FEDERATION_RULE_ID",),
}


class ModelStringInvalid(NotReady):
    """The configured model string is not one litellm can route: the operator must correct it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, data={"reason": "llm_invalid_model"})


class ModelKeyMissing(NotReady):
    """No API key for the model's provider, neither stored nor in the environment."""

    def __init__(self, *, provider: str, variables: list[str]) -> None:
        super().__init__(
            LLM_MISSING_KEY.format(provider=provider, variables=" or ".join(variables)),
            data={"reason": "llm_missing_key", "provider": provider, "variables": variables},
        )


def litellm_import() -> ModuleType:
    """litellm, configured for us. Takes seconds the first time: async code calls it in a thread."""
    module: Any = importlib.import_module("litellm")
    # Otherwise litellm prints a "Give Feedback / Get Help" banner to stdout on every error, and a
    # provider list on every unknown model string.
    module.suppress_debug_info = True
    return module


def language_model_string_validate(*, model: str, api_base: str | None = None) -> str:
    """The provider litellm routes ``model`` to; ``ModelStringInvalid`` if it routes it nowhere.

    ``api_base`` counts: litellm recognises some OpenAI-compatible hosts and routes a bare model
    name to them. Imports litellm (seconds, the first time).
    """
    if not model:
        raise ModelStringInvalid(MODEL_STRING_EMPTY)
    if len(model) > MODEL_MAX_LENGTH:
        raise ModelStringInvalid(MODEL_STRING_TOO_LONG.format(length=len(model), limit=MODEL_MAX_LENGTH))
    if not _MODEL_CHARACTERS.fullmatch(model):
        raise ModelStringInvalid(MODEL_STRING_BAD_CHARACTERS.format(model=_shown(model)))
    litellm = litellm_import()
    try:
        name, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base or None)
    except Exception:
        raise ModelStringInvalid(
            MODEL_STRING_UNKNOWN_PROVIDER.format(model=_shown(model), hint=_provider_hint(litellm, model))
        ) from None
    if not name:
        raise ModelStringInvalid(MODEL_STRING_NO_NAME.format(model=_shown(model), provider=provider))
    return str(provider)


def language_model_key_check(*, model: str, provider: str, api_key: str | None, api_base: str | None) -> None:
    """``ModelKeyMissing`` when the call could only fail for want of a key; no network is used.

    A stored key (``api_key``) is always enough. Otherwise litellm's ``validate_environment`` says
    which of the provider's variables are absent; an empty one counts as absent too (litellm and
    the SDKs treat it so), as far as the provider's usual ``<PROVIDER>_API_KEY`` name goes.
    """
    if api_key:
        return
    alternatives = _OTHER_CREDENTIALS.get(provider, ())
    if alternatives is None or any(os.environ.get(name) for name in alternatives):
        return
    litellm = litellm_import()
    listed = litellm.validate_environment(model=model, api_base=api_base or None)["missing_keys"]
    missing = [name for name in listed if name.endswith(_KEY_SUFFIXES)]
    usual = f"{provider.upper()}_API_KEY"
    if not missing and os.environ.get(usual) == "":
        missing = [usual]
    if missing:
        raise ModelKeyMissing(provider=provider, variables=missing)


def _shown(model: str) -> str:
    # repr: a control character or lone surrogate shows as an escape, not as itself.
    shown = repr(model[:_SHOWN_CHARACTERS])
    return shown + "..." if len(model) > _SHOWN_CHARACTERS else shown


def _provider_hint(litellm: ModuleType, model: str) -> str:
    prefix, slash, _ = model.partition("/")
    if not slash:
        return ""
    known = [str(getattr(p, "value", p)) for p in litellm.provider_list]
    close = difflib.get_close_matches(prefix.lower(), known, n=1, cutoff=0.75)
    return UNKNOWN_PROVIDER_HINT.format(provider=close[0]) if close else ""

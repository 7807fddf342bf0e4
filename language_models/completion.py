"""Every LLM call in the product: ``llm_complete``, with litellm underneath and its errors translated.

litellm takes about three seconds to import, so it is imported on the first call, once, in a worker
thread: the event loop never waits on it.

Test hook: with ``GATEHOUSE["LLM_MOCK_RESPONSES_FILE"]`` set, each call answers from that script
through litellm's own ``mock_response`` (``language_models.scripted``, imported only then).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from core.conf import gatehouse_settings
from core.errors import GatehouseError, Timeout, Unavailable
from language_models.metrics import metrics_llm_call
from language_models.selectors import ModelConfig

logger = logging.getLogger(__name__)

LLM_TIMED_OUT = "The language model {model} did not answer within {seconds:g} s."
LLM_CREDENTIALS_REFUSED = (
    "The language model provider refused the API key configured for {model}. An operator must fix "
    "the key in the admin (Language models)."
)
LLM_PERMISSION_DENIED = (
    "The language model provider refused {model} to the configured API key. An operator must give "
    "the key access to this model, or choose another, in the admin (Language models)."
)
LLM_UNKNOWN_MODEL = (
    "The language model provider does not know the configured model {model!r}. An operator must "
    "correct it in the admin (Language models): a litellm model string such as openai/gpt-4o-mini."
)
LLM_RATE_LIMITED = "The language model provider is rate limiting requests to {model}; try again shortly."
LLM_CONTEXT_TOO_LONG = "The request is longer than the context window of the language model {model}."
LLM_REQUEST_REJECTED = (
    "The language model provider rejected the request to {model}. The reason is in the server log; "
    "an operator may need to adjust the model's settings in the admin (Language models)."
)
LLM_UNREACHABLE = "The language model provider for {model} could not be reached; try again shortly."
LLM_PROVIDER_FAILED = "The language model provider failed to answer for {model}; try again shortly."
LLM_EMPTY_ANSWER = "The language model {model} returned no text."


@dataclass(frozen=True)
class Completion:
    """The model's text, the configured model string that produced it, and the tokens it cost."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int


_litellm: ModuleType | None = None
_litellm_lock = asyncio.Lock()


def _litellm_import() -> ModuleType:
    module: Any = importlib.import_module("litellm")
    # Otherwise litellm prints a "Give Feedback / Get Help" banner to stdout on every error.
    module.suppress_debug_info = True
    return module


async def _litellm_module() -> ModuleType:
    global _litellm
    if _litellm is None:
        async with _litellm_lock:
            if _litellm is None:
                _litellm = await asyncio.to_thread(_litellm_import)
    return _litellm


async def llm_complete(*, config: ModelConfig, messages: list[dict[str, str]], purpose: str) -> Completion:
    """One chat completion from the tenant's model.

    ``purpose`` names the call site (``"sql"``, ``"answer"``...) for the log and the test hook.
    ``config.timeout_seconds`` bounds the whole call. Provider failures raise ``Unavailable``,
    running out of time ``Timeout``; no message or log line carries the API key.
    """
    litellm = await _litellm_module()
    _provider_check(litellm, config=config)
    mock: dict[str, Any] = {}
    script = gatehouse_settings.LLM_MOCK_RESPONSES_FILE
    if script:
        # Imported only here: a server whose settings name no script never loads the player.
        from language_models.scripted import llm_script_arguments

        mock = await llm_script_arguments(litellm, path=str(script), purpose=purpose, model=config.model)
    started = time.monotonic()
    try:
        async with asyncio.timeout(config.timeout_seconds):
            response = await litellm.acompletion(
                model=config.model,
                messages=messages,
                api_key=config.api_key,
                api_base=config.api_base,
                temperature=config.temperature,
                max_tokens=config.max_output_tokens,
                timeout=config.timeout_seconds,
                # Some models accept no temperature (OpenAI's reasoning models): leave it out for
                # them rather than refuse every call.
                drop_params=True,
                **mock,
            )
    except Exception as error:
        translated = _translate(error, config=config)
        if translated is None:
            raise
        logger.warning(
            "LLM call for %s with %s failed after %.0f ms: %s: %s",
            purpose,
            config.model,
            (time.monotonic() - started) * 1000,
            type(error).__name__,
            _redacted(str(error), config=config),
            extra={"event": "llm.failed", "purpose": purpose, "model": config.model},
        )
        metrics_llm_call(model=config.model, purpose=purpose, outcome="error")
        raise translated from None
    duration_ms = (time.monotonic() - started) * 1000
    text = response.choices[0].message.content if response.choices else None
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    logger.info(
        "LLM call for %s with %s: %d prompt and %d completion tokens in %.0f ms",
        purpose,
        config.model,
        prompt_tokens,
        completion_tokens,
        duration_ms,
        extra={
            "event": "llm.completed",
            "purpose": purpose,
            "model": config.model,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "duration_ms": round(duration_ms, 1),
        },
    )
    metrics_llm_call(
        model=config.model,
        purpose=purpose,
        outcome="ok" if text else "error",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
    if not text:
        raise Unavailable(LLM_EMPTY_ANSWER.format(model=config.model), data={"reason": "llm_empty_answer"})
    return Completion(
        text=text, model=config.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
    )


def _provider_check(litellm: ModuleType, *, config: ModelConfig) -> None:
    # A model string naming no provider litellm knows fails inside litellm as a generic bad
    # request; asking first lets the message say what is actually wrong.
    try:
        litellm.get_llm_provider(model=config.model, api_base=config.api_base)
    except Exception:
        logger.warning("LLM model %r names no provider litellm knows", config.model)
        raise Unavailable(
            LLM_UNKNOWN_MODEL.format(model=config.model), data={"reason": "llm_unknown_model"}
        ) from None


def _translate(error: Exception, *, config: ModelConfig) -> GatehouseError | None:
    """Our error for a litellm (or provider SDK) failure; None for anything else, which propagates."""
    import openai
    from litellm import exceptions as llm

    model = config.model
    if isinstance(error, TimeoutError | openai.APITimeoutError):
        return Timeout(
            LLM_TIMED_OUT.format(model=model, seconds=config.timeout_seconds),
            data={"reason": "llm_timeout", "timeoutSeconds": config.timeout_seconds},
        )
    # Most specific first: several of these subclass BadRequestError or APIConnectionError.
    table: list[tuple[type[Exception] | tuple[type[Exception], ...], str, str]] = [
        (llm.ContextWindowExceededError, LLM_CONTEXT_TOO_LONG, "llm_context_window_exceeded"),
        (openai.AuthenticationError, LLM_CREDENTIALS_REFUSED, "llm_credentials_refused"),
        (openai.PermissionDeniedError, LLM_PERMISSION_DENIED, "llm_permission_denied"),
        ((openai.NotFoundError, llm.LiteLLMUnknownProvider), LLM_UNKNOWN_MODEL, "llm_unknown_model"),
        (openai.RateLimitError, LLM_RATE_LIMITED, "llm_rate_limited"),
        (openai.BadRequestError, LLM_REQUEST_REJECTED, "llm_request_rejected"),
        (openai.APIConnectionError, LLM_UNREACHABLE, "llm_unreachable"),
        (openai.APIError, LLM_PROVIDER_FAILED, "llm_provider_failed"),
    ]
    for kinds, message, reason in table:
        if isinstance(error, kinds):
            return Unavailable(message.format(model=model), data={"reason": reason})
    return None


def _redacted(text: str, *, config: ModelConfig) -> str:
    """A provider's message, for the log: without the key (some echo part of it) and bounded."""
    if config.api_key:
        text = text.replace(config.api_key, "[redacted]")
    return text[:500]

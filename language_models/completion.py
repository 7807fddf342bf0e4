"""Every LLM call in the product: ``llm_complete`` and ``llm_complete_tools``, with litellm
underneath and its errors translated.

litellm takes about three seconds to import, so it is imported on the first call, once, in a worker
thread: the event loop never waits on it.

Before any network: the model string must be one litellm routes, and its provider's key must be
stored or in the environment (``language_models.model_checks``), so either mistake fails at once.
The call itself is bounded by the model's timeout, a connect timeout and a retry count from settings
(``LLM_CONNECT_TIMEOUT_SECONDS``, ``LLM_MAX_RETRIES``).

Each litellm exception has its own message and ``data.reason``. The class says what helps: what an
operator must fix in the admin (key, model, access, a request the provider refuses) is ``NotReady``,
as is having no model at all; what may pass (rate limit, outage, unreachable) is ``Unavailable``;
running out of time is ``Timeout``. No message repeats the provider's answer, which can echo the
request or part of the key: that goes to the log, bounded and with the key removed.

Both functions share one path (checks, bounds, translation, log, metrics); they differ only in what
they ask for and read back. A tool call whose arguments are not a JSON object is returned with an
``error``, not raised: the model made the mistake, and the agent tells it so it can try again.

Test hook: with ``GATEHOUSE["LLM_MOCK_RESPONSES_FILE"]`` set, each call answers from that script
through litellm's own ``mock_response`` (``language_models.scripted``, imported only then). A
scripted call reaches no provider, so it needs no key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from core.conf import gatehouse_settings
from core.errors import (
    GatehouseError,
    Timeout,
    Unavailable,
    UpstreamFailed,
    UpstreamNotFound,
    UpstreamRateLimited,
    UpstreamRefused,
    UpstreamRejectedRequest,
)
from language_models.metrics import metrics_llm_call
from language_models.model_checks import (
    ModelKeyMissing,
    ModelStringInvalid,
    language_model_key_check,
    language_model_string_validate,
    litellm_import,
)
from language_models.selectors import ModelConfig

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

LLM_TIMED_OUT = "The language model {model} did not answer within {seconds:g} s."
LLM_STORED_KEY_REFUSED = (
    "The language model provider refused the API key stored for {model}. An operator must enter a "
    "valid one in the admin (Language models)."
)
LLM_ENVIRONMENT_KEY_REFUSED = (
    "The language model provider refused the API key for {model} from the server's environment. An "
    "operator must correct that variable, or enter a key in the admin (Language models)."
)
LLM_HEADER_KEY_REFUSED = (
    "The language model provider refused the API key given in X-Provider-Api-Key for {model}."
)
LLM_PERMISSION_DENIED = (
    "The language model provider refused {model} to the configured API key. An operator must give "
    "the key access to this model, or choose another, in the admin (Language models)."
)
LLM_MODEL_NOT_FOUND = (
    "The language model provider has no model {model!r} (or not for this API key). An operator must "
    "correct it in the admin (Language models)."
)
LLM_PAYMENT_REQUIRED = (
    "The language model provider refused {model} for billing reasons. An operator must check the "
    "provider account."
)
LLM_RATE_LIMITED = "The language model provider is rate limiting requests to {model}; try again shortly."
LLM_CONTEXT_TOO_LONG = (
    "The request is longer than the context window of the language model {model}: ask a narrower "
    "question, or an operator can choose a model with a larger window in the admin (Language models)."
)
LLM_REQUEST_REJECTED = (
    "The language model provider rejected the request to {model}. The reason is in the server log; "
    "an operator may need to adjust the model's settings in the admin (Language models)."
)
LLM_UNREACHABLE = "The language model provider for {model} could not be reached; try again shortly."
LLM_PROVIDER_FAILED = "The language model provider failed to answer for {model}; try again shortly."
LLM_EMPTY_ANSWER = "The language model {model} returned no text."
TOOL_ARGUMENTS_NOT_JSON = "The arguments of this tool call are not valid JSON; send a JSON object."
TOOL_ARGUMENTS_NOT_OBJECT = "The arguments of this tool call are not a JSON object; send an object."


@dataclass(frozen=True)
class Completion:
    """The model's text, the configured model string that produced it, and the tokens it cost."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    # What the provider charged, in US dollars, as litellm prices it; None when it cannot.
    cost: float | None = None


@dataclass(frozen=True)
class ToolCall:
    """One tool the model asked to call. ``error`` says why its arguments were unusable (they are
    then ``{}``): the model's mistake, to be told to it, not raised."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None


@dataclass(frozen=True)
class ToolCompletion:
    """The model's text (may be empty when it calls tools), its tool calls, and what it cost."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int
    completion_tokens: int
    # As in ``Completion``.
    cost: float | None = None


_litellm: ModuleType | None = None
_litellm_lock = asyncio.Lock()


async def litellm_module() -> ModuleType:
    """litellm, imported once in a worker thread the first time."""
    global _litellm
    if _litellm is None:
        async with _litellm_lock:
            if _litellm is None:
                _litellm = await asyncio.to_thread(litellm_import)
    return _litellm


async def llm_complete(
    *,
    config: ModelConfig,
    messages: list[dict[str, str]],
    purpose: str,
    response_format: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> Completion:
    """One chat completion from the tenant's model.

    ``purpose`` names the call site (``"sql"``, ``"answer"``...) for the log and the test hook.
    ``response_format`` asks for structured output (``{"type": "json_object"}`` or a JSON schema);
    models that do not take it answer in text, so the caller still parses and checks what comes back.
    ``config.timeout_seconds`` bounds the whole call, retries included. A model or key that cannot
    work raises ``NotReady`` before any network; provider failures raise ``NotReady`` or
    ``Unavailable`` (see the module docstring), running out of time ``Timeout``. No message or log
    line carries the API key. ``options`` are further litellm arguments (``top_p``, ``stop``...) the
    caller has already checked.
    """
    extra: dict[str, Any] = dict(options or {})
    if response_format is not None:
        extra["response_format"] = response_format
    response, started = await _completion_response(
        config=config, messages=messages, purpose=purpose, extra=extra
    )
    text = response.choices[0].message.content if response.choices else None
    prompt_tokens, completion_tokens = _completion_record(
        response, config=config, purpose=purpose, started=started, answered=bool(text)
    )
    if not text:
        raise Unavailable(LLM_EMPTY_ANSWER.format(model=config.model), data={"reason": "llm_empty_answer"})
    return Completion(
        text=text,
        model=config.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=_cost(response),
    )


def _cost(response: Any) -> float | None:
    """litellm's price of the call (its own cost map), when it knows the model."""
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if cost is None:
        try:
            import litellm

            cost = litellm.completion_cost(completion_response=response)
        except Exception:
            # An unpriced model (a self-hosted one, a new name): no cost, not a failed call.
            return None
    try:
        return float(cost)
    except (TypeError, ValueError):
        return None


async def llm_complete_tools(
    *, config: ModelConfig, messages: list[dict[str, Any]], tools: list[dict[str, Any]], purpose: str
) -> ToolCompletion:
    """One chat completion that may call ``tools`` (OpenAI function-tool definitions).

    Same checks, bounds, errors, log and metrics as ``llm_complete``. A tool call whose arguments are
    not a JSON object is the model's mistake, not ours: it comes back with ``arguments={}`` and
    ``error`` saying so, for the caller to tell the model. An answer with neither text nor tool calls
    is ``Unavailable``, as in ``llm_complete``.
    """
    response, started = await _completion_response(
        config=config,
        messages=messages,
        purpose=purpose,
        # Providers refuse an empty tool list: with none, it is a plain completion.
        extra={"tools": tools} if tools else {},
    )
    message = response.choices[0].message if response.choices else None
    text = (getattr(message, "content", None) or "") if message is not None else ""
    calls = tuple(_tool_call(raw) for raw in (getattr(message, "tool_calls", None) or []))
    prompt_tokens, completion_tokens = _completion_record(
        response, config=config, purpose=purpose, started=started, answered=bool(text or calls)
    )
    if not text and not calls:
        raise Unavailable(LLM_EMPTY_ANSWER.format(model=config.model), data={"reason": "llm_empty_answer"})
    return ToolCompletion(
        text=text,
        tool_calls=calls,
        model=config.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=_cost(response),
    )


def _tool_call(raw: Any) -> ToolCall:
    function = getattr(raw, "function", None)
    name = str(getattr(function, "name", None) or "")
    call_id = str(getattr(raw, "id", None) or "")
    arguments_text = getattr(function, "arguments", None)
    if arguments_text is None or arguments_text == "":
        return ToolCall(id=call_id, name=name, arguments={})
    try:
        arguments = json.loads(arguments_text) if isinstance(arguments_text, str) else arguments_text
    except (ValueError, RecursionError):
        return ToolCall(id=call_id, name=name, arguments={}, error=TOOL_ARGUMENTS_NOT_JSON)
    if not isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, arguments={}, error=TOOL_ARGUMENTS_NOT_OBJECT)
    return ToolCall(id=call_id, name=name, arguments=arguments)


async def _completion_response(
    *, config: ModelConfig, messages: list[dict[str, Any]], purpose: str, extra: dict[str, Any]
) -> tuple[Any, float]:
    """litellm's response to one call and when it started; failures translated, logged and counted."""
    litellm = await litellm_module()
    script = gatehouse_settings.LLM_MOCK_RESPONSES_FILE
    _check_before_sending(config=config, scripted=bool(script), purpose=purpose)
    mock: dict[str, Any] = {}
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
                timeout=_timeout(config),
                # The SDK's own retries, for what may pass (connection, 429, 5xx). Not litellm's
                # num_retries: its wrapper retries every error, a refused key too, and clears the
                # module-wide litellm.num_retries as it goes.
                max_retries=gatehouse_settings.LLM_MAX_RETRIES,
                # Some models accept no temperature (OpenAI's reasoning models), or no
                # response_format: leave it out for them rather than refuse every call.
                drop_params=True,
                **extra,
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
    return response, started


def _completion_record(
    response: Any, *, config: ModelConfig, purpose: str, started: float, answered: bool
) -> tuple[int, int]:
    """Log and count a call that came back; its prompt and completion tokens."""
    duration_ms = (time.monotonic() - started) * 1000
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
        outcome="ok" if answered else "error",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
    return prompt_tokens, completion_tokens


def _check_before_sending(*, config: ModelConfig, scripted: bool, purpose: str) -> None:
    """Refuse, before any network, a model string litellm cannot route or a key that is missing."""
    try:
        provider = language_model_string_validate(model=config.model, api_base=config.api_base)
        if not scripted:
            language_model_key_check(
                model=config.model, provider=provider, api_key=config.api_key, api_base=config.api_base
            )
    except (ModelStringInvalid, ModelKeyMissing) as refusal:
        logger.warning(
            "LLM call for %s refused before sending: %s",
            purpose,
            refusal.message,
            extra={"event": "llm.refused", "purpose": purpose, "reason": (refusal.data or {}).get("reason")},
        )
        raise


def _timeout(config: ModelConfig) -> httpx.Timeout:
    import httpx

    # Connecting gets a shorter limit than answering: a wrong host or a dropped route fails in
    # seconds, not after the model's whole timeout. litellm applies the connect part to the
    # providers whose clients take an httpx.Timeout, and the total to the others.
    total = config.timeout_seconds
    return httpx.Timeout(total, connect=min(float(gatehouse_settings.LLM_CONNECT_TIMEOUT_SECONDS), total))


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
    refused_key = {"header": LLM_HEADER_KEY_REFUSED, "environment": LLM_ENVIRONMENT_KEY_REFUSED}.get(
        config.key_source, LLM_STORED_KEY_REFUSED if config.api_key else LLM_ENVIRONMENT_KEY_REFUSED
    )
    if isinstance(error, openai.RateLimitError):
        return UpstreamRateLimited(
            LLM_RATE_LIMITED.format(model=model),
            retry_after_seconds=_provider_retry_after(error),
            reason="llm_rate_limited",
        )
    if _unreachable(error):
        # litellm reports a refused connection to some providers (OpenAI, Anthropic) as a 500
        # InternalServerError; the cause in its chain says what happened.
        return Unavailable(LLM_UNREACHABLE.format(model=model), data={"reason": "llm_unreachable"})
    # Most specific first: ContextWindowExceededError and PaymentRequiredError are BadRequestErrors,
    # litellm's Timeout (handled above) an APIConnectionError, and everything an APIError. Each
    # class carries its JSON-RPC code and its REST status (core.errors).
    table: list[tuple[type[Exception] | tuple[type[Exception], ...], type[GatehouseError], str, str]] = [
        (
            llm.ContextWindowExceededError,
            UpstreamRejectedRequest,
            LLM_CONTEXT_TOO_LONG,
            "llm_context_window_exceeded",
        ),
        (llm.PaymentRequiredError, UpstreamRefused, LLM_PAYMENT_REQUIRED, "llm_payment_required"),
        (openai.AuthenticationError, UpstreamRefused, refused_key, "llm_credentials_refused"),
        (openai.PermissionDeniedError, UpstreamRefused, LLM_PERMISSION_DENIED, "llm_permission_denied"),
        (openai.NotFoundError, UpstreamNotFound, LLM_MODEL_NOT_FOUND, "llm_model_not_found"),
        (openai.BadRequestError, UpstreamRejectedRequest, LLM_REQUEST_REJECTED, "llm_request_rejected"),
        (openai.APIConnectionError, Unavailable, LLM_UNREACHABLE, "llm_unreachable"),
        (llm.ServiceUnavailableError, Unavailable, LLM_PROVIDER_FAILED, "llm_provider_failed"),
        (openai.APIError, UpstreamFailed, LLM_PROVIDER_FAILED, "llm_provider_failed"),
    ]
    for kinds, kind, message, reason in table:
        if isinstance(error, kinds):
            return kind(message.format(model=model), data={"reason": reason})
    return None


def _unreachable(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is a connection that could not be made."""
    import httpx
    import openai

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 10:
        seen.add(id(current))
        if isinstance(current, openai.APITimeoutError):
            return False
        if isinstance(current, openai.APIConnectionError | httpx.ConnectError | ConnectionError):
            return True
        current = current.__cause__ or current.__context__
    return False


# When a provider's 429 gives no Retry-After of its own.
PROVIDER_RETRY_AFTER_DEFAULT_SECONDS = 30


def _provider_retry_after(error: Exception) -> int:
    """The provider's own Retry-After (seconds), bounded to an hour; a default when it gave none."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or getattr(error, "litellm_response_headers", None) or {}
    try:
        value = headers.get("retry-after") if hasattr(headers, "get") else None
        seconds = int(float(value)) if value is not None else PROVIDER_RETRY_AFTER_DEFAULT_SECONDS
    except (TypeError, ValueError):
        seconds = PROVIDER_RETRY_AFTER_DEFAULT_SECONDS
    return min(max(seconds, 1), 3600)


def _redacted(text: str, *, config: ModelConfig) -> str:
    """A provider's message, for the log: without the key (some echo part of it) and bounded."""
    if config.api_key:
        text = text.replace(config.api_key, "[redacted]")
    return text[:500]

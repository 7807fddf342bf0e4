"""The governed model call: what every model call of the platform goes through, in this order.

1. litellm imported (once, in a thread) and the call's provider named.
2. The rate limit for model calls (``RateLimitScope.MODEL``, per person and feature).
3. The budgets, under the tenant's lock, and the call's reservation (``usage.usage_begin``).
4. The completion itself (``language_models.completion``: bounds, the provider's errors translated
   into the one error vocabulary, log and per-model metrics).
5. What it spent (the operator's price or litellm's: ``pricing``) in its usage record, and one
   ``model.called`` audit row naming the feature, linked to the request by its id.

A refusal at 2 or 3 leaves a ``refused`` record and a ``denied`` audit row; a failure at 4, or in
the caller's own use of the answer inside the ``model_call`` block (an answer that breaks its
schema), an ``error`` record that keeps the tokens the answer cost. A record or audit row that
cannot be written is logged, never raised over the call's own outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from core.audit.trail import audit_entry, audit_record_async
from core.db import db_call
from core.errors import BudgetExceeded, GatehouseError, RateLimited
from core.identity import Identity
from core.models import AuditAction, AuditOutcome, RateLimitScope
from core.ratelimit.limits import rate_limit_call
from core.request_context import current_request_id
from language_models.completion import (
    Completion,
    ToolCompletion,
    litellm_module,
    llm_complete,
    llm_complete_tools,
)
from language_models.governed.pricing import model_cost, model_cost_estimate, prompt_tokens_estimate
from language_models.governed.usage import UsageStart, usage_begin, usage_end, usage_not_run
from language_models.model_checks import ModelStringInvalid, language_model_string_validate
from language_models.models import Feature, UsageOutcome
from language_models.selectors import ModelConfig

logger = logging.getLogger(__name__)

ONE_COMPLETION = "A governed model call makes one completion; open another for the next."


@dataclass(frozen=True)
class ModelUse:
    """Who asks for model calls, for what, and through which channel (``mcp``, ``api``, ``admin``)."""

    identity: Identity
    feature: Feature
    channel: str = "mcp"


class GovernedCall:
    """One model call inside ``model_call``: at most one completion, then its record."""

    def __init__(
        self,
        *,
        use: ModelUse,
        config: ModelConfig,
        messages: list[dict[str, Any]],
        purpose: str,
        start: UsageStart,
    ) -> None:
        self.use = use
        self.config = config
        self.messages = messages
        self.purpose = purpose
        self.start = start
        self.usage_id: uuid.UUID | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost: float | None = None
        self._completed = False
        self._started = time.monotonic()

    async def complete(
        self, *, response_format: dict[str, Any] | None = None, options: dict[str, Any] | None = None
    ) -> Completion:
        self._once()
        completion = await llm_complete(
            config=self.config,
            messages=self.messages,
            purpose=self.purpose,
            response_format=response_format,
            options=options,
        )
        return dataclasses.replace(completion, cost=self._spent(completion))

    async def complete_tools(self, *, tools: list[dict[str, Any]]) -> ToolCompletion:
        self._once()
        completion = await llm_complete_tools(
            config=self.config, messages=self.messages, tools=tools, purpose=self.purpose
        )
        return dataclasses.replace(completion, cost=self._spent(completion))

    def _once(self) -> None:
        if self._completed:
            raise RuntimeError(ONE_COMPLETION)
        self._completed = True
        self._started = time.monotonic()

    def _spent(self, completion: Completion | ToolCompletion) -> float | None:
        self.prompt_tokens = completion.prompt_tokens
        self.completion_tokens = completion.completion_tokens
        self.cost = model_cost(
            config=self.config,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            litellm_cost=completion.cost,
        )
        return self.cost

    @property
    def duration_ms(self) -> int:
        return round((time.monotonic() - self._started) * 1000)


@contextlib.asynccontextmanager
async def model_call(
    *,
    use: ModelUse,
    config: ModelConfig,
    messages: list[dict[str, Any]],
    purpose: str,
    provider: str | None = None,
    structured: bool = False,
) -> AsyncIterator[GovernedCall]:
    """A governed call of ``config``'s model with ``messages`` (see the module docstring).

    ``purpose`` names the call site for the log and the test hook (``"sql"``, ``"answer"``...);
    ``provider`` is the caller's when it named one (the gateway), else litellm's routing of the
    model string. Raises ``RateLimited`` or ``BudgetExceeded`` before the call, the completion's
    errors during it, and whatever the block raises.
    """
    # litellm takes seconds to import the first time: in a thread, never on the event loop.
    await litellm_module()
    provider = provider or _provider(config)
    start = UsageStart(
        identity=use.identity,
        feature=use.feature,
        channel=use.channel,
        provider=provider,
        model=config.model.removeprefix(f"{provider}/"),
        key_source=config.key_source,
        structured=structured,
        request_id=current_request_id(),
    )
    call = GovernedCall(use=use, config=config, messages=messages, purpose=purpose, start=start)
    await _begin(call)
    try:
        yield call
    except BaseException as error:
        # Shielded: a cancelled caller's call is still recorded (and its reservation released).
        await asyncio.shield(_end(call, error))
        raise
    await _end(call, None)


async def model_complete(
    *,
    use: ModelUse,
    config: ModelConfig,
    messages: list[dict[str, Any]],
    purpose: str,
    response_format: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> Completion:
    """One governed chat completion (``model_call`` with nothing else inside)."""
    async with model_call(use=use, config=config, messages=messages, purpose=purpose) as call:
        return await call.complete(response_format=response_format, options=options)


async def model_complete_tools(
    *,
    use: ModelUse,
    config: ModelConfig,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    purpose: str,
) -> ToolCompletion:
    """One governed completion that may call ``tools``."""
    async with model_call(use=use, config=config, messages=messages, purpose=purpose) as call:
        return await call.complete_tools(tools=tools)


async def _begin(call: GovernedCall) -> None:
    start = call.start
    try:
        await rate_limit_call(identity=start.identity, scope=RateLimitScope.MODEL, target=start.feature)
    except RateLimited as error:
        await _refused(call, error, record=True)
        raise
    prompt_tokens = prompt_tokens_estimate(call.messages)
    reserve_tokens = prompt_tokens + call.config.max_output_tokens
    reserve_cost = model_cost_estimate(
        config=call.config, prompt_tokens=prompt_tokens, completion_tokens=call.config.max_output_tokens
    )
    try:
        call.usage_id = await db_call(
            usage_begin, start=start, reserve_tokens=reserve_tokens, reserve_cost=reserve_cost
        )
    except BudgetExceeded as error:
        # usage_begin wrote the refused record in its place.
        await _refused(call, error, record=False)
        raise


async def _refused(call: GovernedCall, error: GatehouseError, *, record: bool) -> None:
    if record:
        try:
            call.usage_id = await db_call(
                usage_not_run, start=call.start, outcome=UsageOutcome.REFUSED, error_code=error.api_code
            )
        except Exception:
            logger.exception("The usage record of a refused model call could not be written")
    await _audit(call, outcome=AuditOutcome.DENIED, error_code=error.api_code, duration_ms=0)


async def _end(call: GovernedCall, error: BaseException | None) -> None:
    if error is None:
        outcome, code = UsageOutcome.OK, ""
    elif isinstance(error, asyncio.CancelledError):
        outcome, code = UsageOutcome.ERROR, "cancelled"
    else:
        outcome = UsageOutcome.ERROR
        code = error.api_code if isinstance(error, GatehouseError) else "internal_error"
    duration_ms = call.duration_ms
    if call.usage_id is not None:
        try:
            await db_call(
                usage_end,
                usage_id=call.usage_id,
                outcome=outcome,
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                cost=call.cost,
                duration_ms=duration_ms,
                error_code=code,
            )
        except Exception:
            # The caller is owed the call's own outcome, not the record's (a database outage, say).
            logger.exception("The usage record of a model call could not be completed")
    await _audit(
        call,
        outcome=AuditOutcome.OK if error is None else AuditOutcome.ERROR,
        error_code=code,
        duration_ms=duration_ms,
    )


async def _audit(call: GovernedCall, *, outcome: AuditOutcome, error_code: str, duration_ms: int) -> None:
    start = call.start
    detail: dict[str, Any] = {
        "feature": start.feature,
        "purpose": call.purpose,
        "usage": call.usage_id.hex if call.usage_id else None,
        "promptTokens": call.prompt_tokens,
        "completionTokens": call.completion_tokens,
        "cost": call.cost,
    }
    if error_code:
        detail["error"] = error_code
    entry = audit_entry(
        action=AuditAction.MODEL_CALLED,
        outcome=outcome,
        identity=start.identity,
        target=f"{start.provider}/{start.model}",
        duration_ms=duration_ms,
        detail=detail,
    )
    try:
        await audit_record_async(entry, flushed=outcome != AuditOutcome.OK)
    except Exception:
        logger.exception("The audit row of a model call could not be written")


def _provider(config: ModelConfig) -> str:
    try:
        return language_model_string_validate(model=config.model, api_base=config.api_base)
    except ModelStringInvalid:
        # The completion refuses it with its own message; the record names what it can.
        return config.model.split("/", 1)[0] if "/" in config.model else ""

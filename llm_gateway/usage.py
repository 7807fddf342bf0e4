"""One usage record per gateway call that got past validation, and its Prometheus counters.

Budgets are summed from these rows (``llm_gateway.budgets``), operators filter and export them, and
the record's id is the call's ``id`` in the answer, so a caller can quote it. A row holds who called,
through which channel and client, which provider and model, tokens, cost, time and outcome; never a
prompt, an answer or a key. Input refused at validation leaves none: nothing was attempted.
"""

from __future__ import annotations

import math
from decimal import Decimal

from core.identity import Identity
from llm_gateway.metrics import metrics_gateway_call
from llm_gateway.models import LlmUsage, UsageOutcome


def usage_record(
    *,
    identity: Identity,
    channel: str,
    provider: str,
    model: str,
    key_source: str,
    outcome: UsageOutcome,
    error_code: str = "",
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cost: float | None = None,
    duration_ms: int = 0,
    structured: bool = False,
    request_id: str = "",
) -> LlmUsage:
    """Write the call's record and count it. Synchronous ORM: async callers use ``db_call``."""
    if cost is not None and not (math.isfinite(cost) and cost >= 0):
        cost = None
    usage = LlmUsage.objects.create(
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        # 0 is "no OAuth client" (a session, a test identity), which has no row to point at.
        application_id=identity.application_id or None,
        channel=channel,
        provider=provider,
        model=model[:200],
        key_source=key_source,
        prompt_tokens=max(prompt_tokens, 0),
        completion_tokens=max(completion_tokens, 0),
        total_tokens=max(prompt_tokens, 0) + max(completion_tokens, 0),
        cost=Decimal(str(cost)).quantize(Decimal("1e-8")) if cost is not None else None,
        duration_ms=max(duration_ms, 0),
        outcome=outcome,
        error_code=error_code[:50],
        structured=structured,
        request_id=request_id[:128],
    )
    metrics_gateway_call(
        tenant=identity.tenant_slug,
        provider=provider,
        channel=channel,
        outcome=outcome,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=cost,
        duration_seconds=duration_ms / 1000,
    )
    return usage

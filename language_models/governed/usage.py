"""One usage record per model call: written as ``pending`` when the call starts (its reservation,
under the tenant's lock, once the budgets allow it), and completed when it ends.

A record holds who called, for which feature, through which channel and client, which provider
and model, tokens, cost, time and outcome; never a prompt, an answer or a key. Its id is what the
LLM gateway answers as the call's ``id``. Synchronous ORM: async callers use ``db_call``.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from decimal import Decimal

from django.db import connection, transaction

from core.errors import BudgetExceeded
from core.identity import Identity
from language_models.governed.budgets import budget_check
from language_models.models import LlmUsage, UsageOutcome

# pg_advisory_xact_lock's first key: the namespace of budget locks (the second is the tenant).
BUDGET_LOCK_NAMESPACE = 3737


@dataclass(frozen=True)
class UsageStart:
    """What a record says about a call before it runs."""

    identity: Identity
    feature: str
    channel: str
    provider: str
    model: str
    key_source: str
    structured: bool
    request_id: str


def usage_begin(*, start: UsageStart, reserve_tokens: int, reserve_cost: float | None) -> uuid.UUID:
    """The call's ``pending`` record, once the budgets allow it; ``BudgetExceeded`` otherwise (and
    then a ``refused`` record is written instead)."""
    try:
        with transaction.atomic():
            _tenant_lock(tenant_id=start.identity.tenant_id)
            budget_check(tenant_id=start.identity.tenant_id, user_id=start.identity.user_id)
            usage = _create(
                start,
                outcome=UsageOutcome.PENDING,
                prompt_tokens=0,
                completion_tokens=0,
                total_tokens=max(reserve_tokens, 0),
                cost=reserve_cost,
            )
    except BudgetExceeded as error:
        usage_not_run(start=start, outcome=UsageOutcome.REFUSED, error_code=error.api_code)
        raise
    return usage.id


def usage_not_run(*, start: UsageStart, outcome: UsageOutcome, error_code: str) -> uuid.UUID:
    """A call that never ran, with nothing spent: ``refused`` (budget, rate limit) or ``error``
    (no model or key for it)."""
    usage = _create(start, outcome=outcome, prompt_tokens=0, completion_tokens=0, error_code=error_code)
    return usage.id


def usage_end(
    *,
    usage_id: uuid.UUID,
    outcome: UsageOutcome,
    prompt_tokens: int,
    completion_tokens: int,
    cost: float | None,
    duration_ms: int,
    error_code: str = "",
) -> None:
    """The call's record completed: what it spent replaces what it reserved."""
    prompt_tokens, completion_tokens = max(prompt_tokens, 0), max(completion_tokens, 0)
    LlmUsage.objects.filter(pk=usage_id).update(
        outcome=outcome,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        cost=_decimal(cost),
        duration_ms=max(duration_ms, 0),
        error_code=error_code[:50],
    )


def _tenant_lock(*, tenant_id: int) -> None:
    """Serialize budget decisions per tenant until the transaction ends."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [BUDGET_LOCK_NAMESPACE, tenant_id])


def _create(
    start: UsageStart,
    *,
    outcome: UsageOutcome,
    prompt_tokens: int,
    completion_tokens: int,
    total_tokens: int | None = None,
    cost: float | None = None,
    error_code: str = "",
) -> LlmUsage:
    identity = start.identity
    return LlmUsage.objects.create(
        tenant_id=identity.tenant_id,
        user_id=identity.user_id or None,
        # 0 is "no OAuth client" (a session, a test identity), which has no row to point at.
        application_id=identity.application_id or None,
        feature=start.feature,
        channel=start.channel,
        provider=start.provider[:50],
        model=start.model[:200],
        key_source=start.key_source,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens if total_tokens is None else total_tokens,
        cost=_decimal(cost),
        outcome=outcome,
        error_code=error_code[:50],
        structured=start.structured,
        request_id=start.request_id[:128],
    )


def _decimal(cost: float | None) -> Decimal | None:
    if cost is None or not (math.isfinite(cost) and cost >= 0):
        return None
    return Decimal(str(cost)).quantize(Decimal("1e-8"))

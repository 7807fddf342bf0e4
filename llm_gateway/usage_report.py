"""``GET /api/v1/usage``: what the caller's tenant spent on models, from its usage records
(``language_models.governed.totals``), in the shapes the OpenAPI document publishes.

The range is UTC days, both included, at most ``MAX_DAYS``; by default the last 30 days. Filters
by model (as recorded, without the provider prefix) and feature. A bad range or an unknown feature
is ``InvalidInput`` naming the parameter, never an empty answer that looks like "nothing spent".
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from pydantic import BaseModel, Field

from core.db import db_call
from core.errors import InvalidInput
from core.identity import Identity
from language_models.governed.totals import Spent, usage_totals
from language_models.models import Feature

DEFAULT_DAYS = 30
MAX_DAYS = 366
MODEL_MAX_CHARS = 200
RANGE_REVERSED = "from must be on or before to."
RANGE_TOO_LONG = f"The range may span at most {MAX_DAYS} days."
FEATURE_UNKNOWN = "feature must be one of: {features}."
MODEL_TOO_LONG = f"model must be at most {MODEL_MAX_CHARS} characters without control characters."


class SpentOut(BaseModel):
    calls: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost: float = Field(description="US dollars: the operator's price for the model, else litellm's.")
    unpriced_calls: int = Field(description="Calls that spent tokens no price was known for.")


class DaySpent(SpentOut):
    day: date


class ModelSpent(SpentOut):
    model: str


class FeatureSpent(SpentOut):
    feature: str


class UsageResponse(BaseModel):
    """Ended calls only (a call in flight holds a reservation, not spending); UTC days."""

    tenant: str
    first_day: date = Field(alias="from")
    last_day: date = Field(alias="to")
    total: SpentOut
    by_day: list[DaySpent]
    by_model: list[ModelSpent]
    by_feature: list[FeatureSpent]

    model_config = {"populate_by_name": True}


async def usage_report(
    *,
    identity: Identity,
    first_day: date | None,
    last_day: date | None,
    model: str | None,
    feature: str | None,
) -> UsageResponse:
    last = last_day or datetime.now(UTC).date()
    first = first_day or last - timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        raise InvalidInput(RANGE_REVERSED, data={"field": "from"})
    if (last - first).days + 1 > MAX_DAYS:
        raise InvalidInput(RANGE_TOO_LONG, data={"field": "to"})
    if feature is not None and feature not in Feature.values:
        raise InvalidInput(
            FEATURE_UNKNOWN.format(features=", ".join(Feature.values)), data={"field": "feature"}
        )
    if model is not None and (len(model) > MODEL_MAX_CHARS or not model.isprintable()):
        raise InvalidInput(MODEL_TOO_LONG, data={"field": "model"})
    totals = await db_call(
        usage_totals,
        tenant_id=identity.tenant_id,
        first_day=first,
        last_day=last,
        model=model,
        feature=feature,
    )
    return UsageResponse.model_validate(
        {
            "tenant": identity.tenant_slug,
            "from": first,
            "to": last,
            "total": _fields(totals.total),
            "by_day": [{"day": day, **_fields(spent)} for day, spent in totals.by_day],
            "by_model": [{"model": name, **_fields(spent)} for name, spent in totals.by_model],
            "by_feature": [{"feature": name, **_fields(spent)} for name, spent in totals.by_feature],
        }
    )


def _fields(spent: Spent) -> dict[str, int | float]:
    return {
        "calls": spent.calls,
        "prompt_tokens": spent.prompt_tokens,
        "completion_tokens": spent.completion_tokens,
        "total_tokens": spent.total_tokens,
        "cost": spent.cost,
        "unpriced_calls": spent.unpriced_calls,
    }

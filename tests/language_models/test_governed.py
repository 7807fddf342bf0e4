"""The governed path every model call takes (``language_models.governed``), on litellm's real code
path with its ``mock_response``: one usage record per call with its feature, tokens and cost (the
operator's price first), the rate limit and the budgets before it, a failure inside the block
recorded with what it cost, and one ``model.called`` audit row each."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.errors import BudgetExceeded, RateLimited
from core.models import AuditAction, AuditEvent, AuditOutcome
from language_models.governed import Feature, ModelUse, model_call, model_complete
from language_models.models import LlmBudget, LlmUsage, UsageOutcome
from tests.support.llm_script_support import llm_script, model_config
from tests.support.members import identity_of

__all__ = ["llm_script"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]

PURPOSE = "governed_test"
MESSAGES = [{"role": "user", "content": "Say OK."}]


@pytest.fixture
def use(contributor) -> ModelUse:
    return ModelUse(identity=identity_of(contributor), feature=Feature.SUMMARY)


async def test_a_call_leaves_one_record_and_one_audit_row(use, llm_script):
    llm_script({PURPOSE: "OK"})
    completion = await model_complete(use=use, config=model_config(), messages=MESSAGES, purpose=PURPOSE)

    [record] = [r async for r in LlmUsage.objects.filter(user_id=use.identity.user_id)]
    assert (record.feature, record.channel, record.outcome) == ("summary", "mcp", UsageOutcome.OK)
    assert (record.provider, record.model) == ("openai", "gpt-4o-mini")
    assert record.prompt_tokens == completion.prompt_tokens > 0
    assert record.total_tokens == completion.prompt_tokens + completion.completion_tokens
    assert record.cost is not None
    assert float(record.cost) == pytest.approx(completion.cost)
    [event] = [e async for e in AuditEvent.objects.filter(action=AuditAction.MODEL_CALLED)]
    assert (event.outcome, event.target, event.user_id) == (
        AuditOutcome.OK,
        "openai/gpt-4o-mini",
        use.identity.user_id,
    )
    assert event.detail["feature"] == "summary"
    assert event.detail["usage"] == record.id.hex


async def test_an_operator_price_is_used_instead_of_litellms(use, llm_script):
    llm_script({PURPOSE: "OK"})
    priced = model_config(
        model="openai/my-own-finetune",
        input_price_per_million=Decimal("2"),
        output_price_per_million=Decimal("10"),
    )
    completion = await model_complete(use=use, config=priced, messages=MESSAGES, purpose=PURPOSE)

    expected = (completion.prompt_tokens * 2 + completion.completion_tokens * 10) / 1_000_000
    assert completion.cost == pytest.approx(expected)
    record = await LlmUsage.objects.aget(user_id=use.identity.user_id)
    assert record.cost is not None
    assert float(record.cost) == pytest.approx(expected)


async def test_a_failure_inside_the_block_is_recorded_with_the_tokens_it_cost(use, llm_script):
    llm_script({PURPOSE: "not what was asked"})

    async def parsed_badly() -> None:
        async with model_call(use=use, config=model_config(), messages=MESSAGES, purpose=PURPOSE) as call:
            await call.complete()
            raise ValueError("unusable")

    with pytest.raises(ValueError, match="unusable"):
        await parsed_badly()

    record = await LlmUsage.objects.aget(user_id=use.identity.user_id)
    assert (record.outcome, record.error_code) == (UsageOutcome.ERROR, "internal_error")
    assert record.total_tokens > 0
    event = await AuditEvent.objects.aget(action=AuditAction.MODEL_CALLED)
    assert event.outcome == AuditOutcome.ERROR


async def test_a_spent_budget_refuses_before_the_call_and_says_so_in_the_record(use, llm_script, contributor):
    llm_script({})  # no call may be made
    await LlmBudget.objects.acreate(tenant_id=contributor.tenant_id, period="month", max_tokens=0)
    with pytest.raises(BudgetExceeded):
        await model_complete(use=use, config=model_config(), messages=MESSAGES, purpose=PURPOSE)

    record = await LlmUsage.objects.aget(user_id=use.identity.user_id)
    assert (record.outcome, record.error_code, record.total_tokens) == (
        UsageOutcome.REFUSED,
        "budget_exceeded",
        0,
    )
    event = await AuditEvent.objects.aget(action=AuditAction.MODEL_CALLED)
    assert (event.outcome, event.detail["error"]) == (AuditOutcome.DENIED, "budget_exceeded")


async def test_the_model_call_limit_counts_per_person_and_feature(use, llm_script, settings):
    settings.GATEHOUSE = {
        **settings.GATEHOUSE,
        "RATE_LIMITS": {**settings.GATEHOUSE["RATE_LIMITS"], "model": "1/minute"},
    }
    llm_script({PURPOSE: "OK"})
    await model_complete(use=use, config=model_config(), messages=MESSAGES, purpose=PURPOSE)
    with pytest.raises(RateLimited):
        await model_complete(use=use, config=model_config(), messages=MESSAGES, purpose=PURPOSE)
    # Another feature of the same person has a count of its own.
    other = ModelUse(identity=use.identity, feature=Feature.INVOKE_AGENT)
    await model_complete(use=other, config=model_config(), messages=MESSAGES, purpose=PURPOSE)

    outcomes = sorted([r.outcome async for r in LlmUsage.objects.filter(user_id=use.identity.user_id)])
    assert outcomes == [UsageOutcome.OK, UsageOutcome.OK, UsageOutcome.REFUSED]

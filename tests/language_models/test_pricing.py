"""What a model call costs and reserves (``language_models.governed.pricing``)."""

from __future__ import annotations

from decimal import Decimal

from language_models.governed.pricing import model_cost_estimate, prompt_tokens_estimate
from tests.support.llm_script_support import model_config


def test_a_reservation_is_priced_by_litellm_or_by_the_operator():
    assert prompt_tokens_estimate([{"role": "user", "content": "x" * 41}]) == 11
    known = model_cost_estimate(config=model_config(), prompt_tokens=1000, completion_tokens=1000)
    assert known is not None
    assert known > 0
    assert (
        model_cost_estimate(
            config=model_config(model="openai/nobody-prices-this"), prompt_tokens=1, completion_tokens=1
        )
        is None
    )
    priced = model_config(model="openai/nobody-prices-this", output_price_per_million=Decimal("1"))
    assert model_cost_estimate(config=priced, prompt_tokens=5, completion_tokens=1_000_000) == 1.0

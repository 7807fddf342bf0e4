"""What a model call costs, in US dollars: the operator's price for the model when one is set
(``LanguageModel.input_price_per_million`` and ``output_price_per_million``), else litellm's own
price list, else unknown (None).

The operator's price wins over litellm's: it is what the tenant was told, or what a self-hosted
or negotiated model really costs. Before a call, the same prices estimate its reservation
(``language_models.governed.budgets``): the prompt at ``CHARS_PER_TOKEN`` and the whole
``max_tokens``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from language_models.model_checks import litellm_import
from language_models.selectors import ModelConfig

CHARS_PER_TOKEN = 4
MILLION = Decimal(1_000_000)


def model_priced(*, config: ModelConfig) -> bool:
    """Whether an operator set a price for this model."""
    return config.input_price_per_million is not None or config.output_price_per_million is not None


def model_cost(
    *, config: ModelConfig, prompt_tokens: int, completion_tokens: int, litellm_cost: float | None
) -> float | None:
    """The call's cost: the operator's price for its tokens, else what litellm reported."""
    if model_priced(config=config):
        return _operator_cost(config=config, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return litellm_cost


def model_cost_estimate(*, config: ModelConfig, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What a call of that many tokens would cost, for its reservation; None when nobody prices it.
    litellm must have been imported (it is, before any call: ``completion.litellm_module``)."""
    if model_priced(config=config):
        return _operator_cost(config=config, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    try:
        prompt_cost, completion_cost = litellm_import().cost_per_token(
            model=config.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
        cost = float(prompt_cost) + float(completion_cost)
    except Exception:
        # An unpriced model (a self-hosted one, a new name): nothing to reserve in dollars.
        return None
    return cost if math.isfinite(cost) and cost >= 0 else None


def prompt_tokens_estimate(messages: list[dict[str, Any]]) -> int:
    """A prompt's tokens at ``CHARS_PER_TOKEN``, from its text (tool definitions are not counted)."""
    chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(str(part)) for part in content)
    return math.ceil(chars / CHARS_PER_TOKEN)


def _operator_cost(*, config: ModelConfig, prompt_tokens: int, completion_tokens: int) -> float:
    input_price = config.input_price_per_million or Decimal(0)
    output_price = config.output_price_per_million or Decimal(0)
    return float((input_price * prompt_tokens + output_price * completion_tokens) / MILLION)

"""What a model call costs and reserves (``language_models.governed.pricing``), and the prices an
operator gives a model in the admin."""

from __future__ import annotations

from decimal import Decimal

import pytest

from language_models.governed.pricing import model_cost_estimate, prompt_tokens_estimate
from language_models.models import LanguageModel
from language_models.selectors import language_model_for_tenant
from tests.support.admin_support import admin_url
from tests.support.llm_admin_support import model_form
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


# The operator's prices, in the admin: a number of dollars or blank, nothing else.

HOSTILE_PRICES = [
    "-1",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "1" * 20,
    "0.0000001",
    "1\x00",
    "\u202e5",
    "5\u200b",
    "1,5",
    "0x10",
    "9" * 100_000,
]


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["input_price_per_million", "output_price_per_million"])
@pytest.mark.parametrize("price", HOSTILE_PRICES, ids=range(len(HOSTILE_PRICES)))
def test_a_price_that_is_not_a_plain_amount_is_refused_on_its_field(client, operator, tenant, field, price):
    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant, **{field: price}))

    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == [field]
    assert not LanguageModel.objects.exists()


@pytest.mark.django_db
def test_an_operator_prices_a_model_litellm_does_not_and_its_calls_are_then_priced(client, operator, tenant):
    form = model_form(
        tenant,
        model="openai/nobody-prices-this",
        input_price_per_million="2.5",
        output_price_per_million="10",
    )
    assert client.post(admin_url(LanguageModel, "add"), form).status_code == 302

    config = language_model_for_tenant(tenant_id=tenant.pk)
    assert (config.input_price_per_million, config.output_price_per_million) == (Decimal("2.5"), Decimal(10))
    cost = model_cost_estimate(config=config, prompt_tokens=1_000_000, completion_tokens=100_000)
    assert cost == pytest.approx(3.5)

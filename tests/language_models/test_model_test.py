"""Testing a tenant's model (``language_models.model_test``), as the console's button and the
admin's action do: one tiny call through the governed path on litellm's real code path with its
``mock_response``, whose reply, tokens and latency come back, or why there was none; the call is
recorded as the tenant's usage by the person who asked, and counts against its budgets."""

from __future__ import annotations

import pytest

from language_models.model_test import REPLY_SHOWN, TEST_PURPOSE, language_model_test
from language_models.models import Feature, LlmUsage, UsageOutcome
from tests.support.factories import LanguageModelFactory
from tests.support.llm_admin_support import LlmBudgetFactory
from tests.support.llm_script_support import llm_script

__all__ = ["llm_script"]

# Transactional: the governed path's records are written on threads of their own, which see only
# committed rows (and see tests/language_models/conftest.py for the audit trail's part).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("admin_model_test")]

API_KEY = "sk-test-model-test-0123456789"


@pytest.fixture
def language_model(tenant):
    return LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)


def test_an_answer_comes_back_with_its_tokens_and_latency(language_model, owner, llm_script):
    llm_script({TEST_PURPOSE: "OK"})

    result = language_model_test(model=language_model, by=owner.user)

    assert (result.ok, result.model, result.reply, result.error) == (True, "openai/gpt-4o-mini", "OK", "")
    assert result.prompt_tokens > 0
    assert result.tokens == result.prompt_tokens + result.completion_tokens
    assert result.latency_ms >= 0


def test_only_the_replys_first_characters_are_kept(language_model, owner, llm_script):
    llm_script({TEST_PURPOSE: "word " * 500})

    result = language_model_test(model=language_model, by=owner.user)

    assert result.reply == ("word " * 500)[:REPLY_SHOWN]


def test_the_call_is_the_tenants_usage_by_the_person_who_asked(language_model, owner, llm_script):
    llm_script({TEST_PURPOSE: "OK"})

    language_model_test(model=language_model, by=owner.user, channel="console")

    [record] = LlmUsage.objects.all()
    assert (record.tenant_id, record.user_id) == (language_model.tenant_id, owner.user_id)
    assert (record.feature, record.channel, record.outcome) == (
        Feature.MODEL_TEST,
        "console",
        UsageOutcome.OK,
    )


def test_a_refused_key_is_a_readable_error_without_the_key(language_model, owner, llm_script):
    llm_script({TEST_PURPOSE: {"error": "AuthenticationError"}})

    result = language_model_test(model=language_model, by=owner.user)

    assert result.ok is False
    assert "refused the API key stored for openai/gpt-4o-mini" in result.error
    assert API_KEY not in result.error


def test_a_spent_budget_refuses_the_call_before_it_is_made(language_model, owner, llm_script):
    llm_script({})  # no call may be made
    LlmBudgetFactory.create(tenant=language_model.tenant, max_tokens=0)

    result = language_model_test(model=language_model, by=owner.user)

    assert result.ok is False
    assert "budget" in result.error.lower()
    assert LlmUsage.objects.get().outcome == UsageOutcome.REFUSED

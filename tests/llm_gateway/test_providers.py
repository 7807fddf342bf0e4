"""The provider table: the five always listed plus the tenant's own, what litellm says each can do,
and whether this tenant can call it now (stored key, working configured model, or a header key)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from llm_gateway.providers import llm_providers_list
from tests.llm_gateway.conftest import HEADER_KEY, identity_of
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mixed_models(tenant, outsider):
    LanguageModelFactory(
        tenant=tenant,
        name="Fast",
        model="openai/gpt-4o-mini",
        api_key="sk-acme-000000000000",
        is_default=True,
    )
    LanguageModelFactory(
        tenant=tenant, name="Local", model="ollama/llama3", api_base="http://ollama.internal:11434"
    )
    LanguageModelFactory(
        tenant=tenant, name="Groq", model="groq/llama-3.1-8b-instant", api_key="gsk-acme-0000000000"
    )
    LanguageModelFactory(
        tenant=outsider.tenant,
        name="Theirs",
        model="anthropic/claude-sonnet-4-5",
        api_key="sk-ant-0000000000",
    )


async def test_the_five_providers_and_the_tenants_own_are_listed(caller, mixed_models):
    response = await llm_providers_list(identity=caller, header_key=None)

    providers = {info.id: info for info in response.providers}
    assert [info.id for info in response.providers] == [
        "openai",
        "anthropic",
        "deepseek",
        "gemini",
        "ollama",
        "groq",
    ]
    assert providers["openai"].models == ["gpt-4o-mini"]
    assert providers["groq"].models == ["llama-3.1-8b-instant"]
    assert providers["anthropic"].models is None


async def test_availability_follows_the_tenants_keys_not_another_tenants(caller, mixed_models, monkeypatch):
    for variable in ("ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)

    response = await llm_providers_list(identity=caller, header_key=None)

    available = {info.id: info.available for info in response.providers}
    assert available == {
        "openai": True,
        "anthropic": False,
        "deepseek": False,
        "gemini": False,
        "ollama": True,
        "groq": True,
    }


async def test_a_header_key_makes_key_based_providers_available_for_that_request(caller, monkeypatch):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)

    with_key = await llm_providers_list(identity=caller, header_key=HEADER_KEY)
    without = await llm_providers_list(identity=caller, header_key=None)

    assert {info.id: info.available for info in with_key.providers} == {
        "openai": True,
        "anthropic": True,
        "deepseek": True,
        "gemini": True,
        "ollama": False,
    }
    assert not any(info.available for info in without.providers)


async def test_a_configured_model_without_a_key_is_available_from_the_environment(
    tenant, contributor, monkeypatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-server-000000000")
    await _create_model(tenant=tenant, name="Env", model="anthropic/claude-sonnet-4-5")

    response = await llm_providers_list(identity=identity_of(contributor), header_key=None)

    assert next(info for info in response.providers if info.id == "anthropic").available


async def test_capabilities_come_from_litellm_with_deepseeks_json_mode_emulated(caller):
    response = await llm_providers_list(identity=caller, header_key=None)

    providers = {info.id: info for info in response.providers}
    assert providers["openai"].structured_output
    assert providers["openai"].json_mode
    assert providers["anthropic"].structured_output
    assert (providers["deepseek"].json_mode, providers["deepseek"].structured_output) == (True, False)


async def _create_model(**values):
    return await sync_to_async(LanguageModelFactory)(**values)

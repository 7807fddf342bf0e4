"""Which key a call uses: the caller's header key for this call, else the tenant's configured model or
its stored key for the provider; never another tenant's, never the server's environment for a model
the tenant did not configure."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput, NotReady
from language_models.model_checks import litellm_import
from llm_gateway.resolution import gateway_model_resolve
from tests.llm_gateway.conftest import HEADER_KEY, OUTSIDER_KEY, STORED_KEY
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module", autouse=True)
def _litellm_loaded() -> None:
    litellm_import()


def _resolve(tenant, **overrides):
    values = {"provider": "openai", "model": "gpt-4o-mini", "header_key": None, **overrides}
    return gateway_model_resolve(tenant_id=tenant.pk, **values)


def test_a_configured_model_uses_its_stored_key_endpoint_and_timeout(tenant):
    LanguageModelFactory(
        tenant=tenant,
        name="Proxy",
        model="openai/gpt-4o-mini",
        api_key=STORED_KEY,
        api_base="https://llm-proxy.example.com/v1",
        request_timeout_seconds=17,
    )

    config = _resolve(tenant)

    assert (config.model, config.api_key, config.key_source) == ("openai/gpt-4o-mini", STORED_KEY, "stored")
    assert (config.api_base, config.timeout_seconds) == ("https://llm-proxy.example.com/v1", 17.0)


def test_a_configured_model_is_found_by_its_name_on_the_provider(tenant, stored_openai):
    assert _resolve(tenant, model="Fast").model == "openai/gpt-4o-mini"
    # On another provider the name is just a model name, which the tenant has no key for.
    with pytest.raises(NotReady):
        _resolve(tenant, provider="anthropic", model="Fast")


def test_the_header_key_takes_precedence_for_the_call(tenant, stored_openai):
    configured = _resolve(tenant, header_key=HEADER_KEY)
    unconfigured = _resolve(tenant, model="gpt-4.1", header_key=HEADER_KEY)

    assert (configured.api_key, configured.key_source) == (HEADER_KEY, "header")
    assert (unconfigured.api_key, unconfigured.key_source, unconfigured.api_base) == (
        HEADER_KEY,
        "header",
        None,
    )
    assert HEADER_KEY not in repr(configured)


def test_an_unconfigured_model_uses_the_stored_key_of_the_default_model_first(tenant):
    LanguageModelFactory(
        tenant=tenant, name="Newer", model="openai/gpt-4o", api_key="sk-newer-key-0000000000"
    )
    LanguageModelFactory(
        tenant=tenant, name="Default", model="openai/gpt-4o-mini", api_key=STORED_KEY, is_default=True
    )

    config = _resolve(tenant, model="gpt-4.1")

    assert (config.model, config.api_key, config.key_source) == ("openai/gpt-4.1", STORED_KEY, "stored")


def test_without_a_default_the_most_recently_updated_key_is_used(tenant):
    older = LanguageModelFactory.create(
        tenant=tenant, name="Older", model="openai/gpt-4o", api_key="sk-older-key-000000000"
    )
    LanguageModelFactory(tenant=tenant, name="Newer", model="openai/gpt-4o-mini", api_key=STORED_KEY)
    assert _resolve(tenant, model="gpt-4.1").api_key == STORED_KEY

    older.save()

    assert _resolve(tenant, model="gpt-4.1").api_key == "sk-older-key-000000000"


def test_another_tenants_key_is_never_used(tenant, outsider_openai):
    with pytest.raises(NotReady) as refused:
        _resolve(tenant)

    assert refused.value.api_code == "not_configured"
    assert OUTSIDER_KEY not in refused.value.message


def test_the_servers_environment_key_is_never_used_for_an_unconfigured_model(tenant, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-environment-key-000000")

    with pytest.raises(NotReady) as refused:
        _resolve(tenant, model="gpt-4.1")

    assert refused.value.data == {"reason": "llm_not_configured", "provider": "openai"}
    assert "openai" in refused.value.message


def test_a_configured_model_without_a_stored_key_uses_the_environment(tenant):
    LanguageModelFactory(tenant=tenant, name="Env", model="openai/gpt-4o-mini")

    config = _resolve(tenant)

    assert (config.api_key, config.key_source) == (None, "environment")


def test_a_keyless_provider_needs_a_configured_endpoint(tenant):
    with pytest.raises(NotReady):
        _resolve(tenant, provider="ollama", model="llama3", header_key=HEADER_KEY)

    LanguageModelFactory(
        tenant=tenant, name="Local", model="ollama/llama3", api_base="http://ollama.internal:11434"
    )
    config = _resolve(tenant, provider="ollama", model="mistral")

    assert (config.model, config.api_base, config.api_key) == (
        "ollama/mistral",
        "http://ollama.internal:11434",
        None,
    )


def test_the_callers_temperature_and_max_tokens_replace_the_configurations(tenant, stored_openai):
    config = _resolve(tenant, temperature=1.3, max_tokens=77)

    assert (config.temperature, config.max_output_tokens) == (1.3, 77)


@pytest.mark.parametrize("provider", ["no-such-provider", "openai2"])
def test_an_unknown_provider_is_refused_naming_the_field(tenant, provider):
    with pytest.raises(InvalidInput) as refused:
        _resolve(tenant, provider=provider)

    assert refused.value.data == {"field": "provider"}


@pytest.mark.parametrize("model", ["gpt 4o", "gpt-4o\x00", "é-model"])
def test_a_model_litellm_cannot_route_is_refused_naming_the_field(tenant, stored_openai, model):
    with pytest.raises(InvalidInput) as refused:
        _resolve(tenant, model=model)

    assert refused.value.data == {"field": "model"}


@pytest.mark.parametrize("header_key", ["sk key with spaces", "sk-\x00-nul", "x" * 5000, "sk-é"])
def test_a_header_key_that_cannot_be_a_key_is_refused_without_repeating_it(tenant, stored_openai, header_key):
    with pytest.raises(InvalidInput) as refused:
        _resolve(tenant, header_key=header_key)

    assert refused.value.data == {"field": "X-Provider-Api-Key"}
    assert header_key not in refused.value.message

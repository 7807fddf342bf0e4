"""A model string litellm cannot route, or a model whose key is missing, is refused before any call,
with one message wherever it shows: ``preflight`` (DEMO_LLM_MODEL), the admin form, ``llm_complete``.

Valid custom strings (``openai/<anything>`` for a compatible server, ``ollama/...``, Bedrock ARNs,
fine-tuned ids) pass: the provider, not litellm's bundled catalog, says whether a model exists.
"""

from __future__ import annotations

import os
import socket
import subprocess
from urllib.parse import urlencode

import pytest
from django.utils.html import escape

from language_models.admin import KEY_MISSING_NOW
from language_models.model_checks import (
    LLM_MISSING_KEY,
    MODEL_STRING_BAD_CHARACTERS,
    MODEL_STRING_EMPTY,
    MODEL_STRING_NO_NAME,
    MODEL_STRING_TOO_LONG,
    MODEL_STRING_UNKNOWN_PROVIDER,
    ModelKeyMissing,
    ModelStringInvalid,
    language_model_key_check,
    language_model_string_validate,
)
from language_models.models import MODEL_MAX_LENGTH, LanguageModel
from tests.support.admin_support import admin_url, post_action
from tests.support.llm_admin_support import model_form
from tests.support.python_process import python_run

LITELLM_EXAMPLES = "write provider/model, such as openai/gpt-4o-mini"


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("openai/gpt-4o-mini", "openai"),
        ("gpt-4o-mini", "openai"),
        ("openai/my-local-model", "openai"),
        ("ft:gpt-4o-mini-2024-07-18:my-org:custom:abc123", "openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("ollama/llama3", "ollama"),
        ("ollama/llama3:8b", "ollama"),
        ("hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", "hosted_vllm"),
        ("openrouter/anthropic/claude-3.5-sonnet:beta", "openrouter"),
        ("azure/my-deployment", "azure"),
        ("vertex_ai/claude-3-5-sonnet@20240620", "vertex_ai"),
        (
            "bedrock/arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-v1:0",
            "bedrock",
        ),
    ],
)
def test_model_strings_litellm_routes_pass_custom_names_included(model, provider):
    assert language_model_string_validate(model=model) == provider


def test_a_bare_name_is_routed_by_its_api_base_as_litellm_does():
    assert language_model_string_validate(model="llama3", api_base="https://api.groq.com/openai/v1") == "groq"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("gpt4", MODEL_STRING_UNKNOWN_PROVIDER.format(model="'gpt4'", hint="")),
        ("foo/bar", MODEL_STRING_UNKNOWN_PROVIDER.format(model="'foo/bar'", hint="")),
        (
            "opneai/gpt-4o",
            MODEL_STRING_UNKNOWN_PROVIDER.format(model="'opneai/gpt-4o'", hint=" (did you mean openai/?)"),
        ),
        (
            "OpenAI/gpt-4o",
            MODEL_STRING_UNKNOWN_PROVIDER.format(model="'OpenAI/gpt-4o'", hint=" (did you mean openai/?)"),
        ),
        ("openai/", MODEL_STRING_NO_NAME.format(model="'openai/'", provider="openai")),
        ("", MODEL_STRING_EMPTY),
    ],
)
def test_a_string_litellm_cannot_route_is_refused_saying_what_to_write(model, message):
    with pytest.raises(ModelStringInvalid) as raised:
        language_model_string_validate(model=model)

    assert raised.value.message == message
    assert raised.value.data == {"reason": "llm_invalid_model"}
    assert raised.value.jsonrpc_code == -32003


@pytest.mark.parametrize(
    "model",
    [
        pytest.param("openai/gpt-4o\x00", id="nul"),
        pytest.param("openai/gpt 4o", id="space"),
        pytest.param("openai/gpt-4o\n", id="newline"),
        pytest.param("openai/gpt-4o\udcff", id="lone-surrogate-from-invalid-utf8"),
        pytest.param("openai/gpt-4o\u202e", id="bidi-override"),
        pytest.param("openai/gpt-4ö", id="non-ascii"),
    ],
)
def test_hostile_characters_are_refused_and_shown_escaped(model):
    with pytest.raises(ModelStringInvalid) as raised:
        language_model_string_validate(model=model)

    assert raised.value.message == MODEL_STRING_BAD_CHARACTERS.format(model=repr(model))
    assert raised.value.message.isprintable()


def test_a_huge_string_is_refused_by_its_length_without_repeating_it():
    model = "openai/" + "x" * 1_000_000

    with pytest.raises(ModelStringInvalid) as raised:
        language_model_string_validate(model=model)

    assert raised.value.message == MODEL_STRING_TOO_LONG.format(length=len(model), limit=MODEL_MAX_LENGTH)


def test_a_long_unknown_string_is_shown_cut_short():
    model = "nonsense/" + "x" * (MODEL_MAX_LENGTH - 9)

    with pytest.raises(ModelStringInvalid) as raised:
        language_model_string_validate(model=model)

    assert len(raised.value.message) < 300
    assert "..." in raised.value.message


# The key


@pytest.fixture
def no_keys(monkeypatch):
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_API_TOKEN")) or name.startswith(("ANTHROPIC_", "AZURE_")):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize(
    ("model", "provider", "variables"),
    [
        ("openai/gpt-4o-mini", "openai", ["OPENAI_API_KEY"]),
        ("anthropic/claude-sonnet-4-5", "anthropic", ["ANTHROPIC_API_KEY"]),
        ("groq/llama3-8b-8192", "groq", ["GROQ_API_KEY"]),
        ("gemini/gemini-2.0-flash", "gemini", ["GOOGLE_API_KEY", "GEMINI_API_KEY"]),
    ],
)
def test_a_key_in_neither_the_admin_nor_the_environment_is_named(no_keys, model, provider, variables):
    with pytest.raises(ModelKeyMissing) as raised:
        language_model_key_check(model=model, provider=provider, api_key=None, api_base=None)

    assert raised.value.message == LLM_MISSING_KEY.format(provider=provider, variables=" or ".join(variables))
    assert raised.value.data == {"reason": "llm_missing_key", "provider": provider, "variables": variables}
    assert raised.value.jsonrpc_code == -32003


def test_the_message_reads_as_the_operator_needs_it(no_keys):
    with pytest.raises(ModelKeyMissing) as raised:
        language_model_key_check(model="openai/gpt-4o-mini", provider="openai", api_key=None, api_base=None)

    assert raised.value.message == (
        "Missing API key for openai: set OPENAI_API_KEY or enter it in the admin (Language models)."
    )


def test_an_empty_variable_is_a_missing_key(no_keys):
    no_keys.setenv("OPENAI_API_KEY", "")

    with pytest.raises(ModelKeyMissing, match="set OPENAI_API_KEY"):
        language_model_key_check(model="openai/gpt-4o-mini", provider="openai", api_key=None, api_base=None)


def test_a_stored_key_or_a_variable_is_enough(no_keys):
    language_model_key_check(
        model="openai/gpt-4o-mini", provider="openai", api_key="sk-stored", api_base=None
    )
    no_keys.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    language_model_key_check(model="openai/gpt-4o-mini", provider="openai", api_key=None, api_base=None)


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        # Ollama's base URL defaults to localhost; AWS and Google have credentials litellm's list
        # cannot see (roles, profiles, ADC); Azure also takes AZURE_OPENAI_API_KEY and Entra ID.
        ("ollama/llama3", "ollama"),
        ("hosted_vllm/my-model", "hosted_vllm"),
        ("bedrock/anthropic.claude-v2", "bedrock"),
        ("vertex_ai/gemini-1.5-pro", "vertex_ai"),
        ("azure/my-deployment", "azure"),
    ],
)
def test_providers_that_need_no_api_key_variable_are_not_refused(no_keys, model, provider):
    language_model_key_check(model=model, provider=provider, api_key=None, api_base=None)


def test_anthropic_workload_identity_federation_is_a_key(no_keys):
    no_keys.setenv("ANTHROPIC_FEDERATION_RULE_ID", "rule-1")

    language_model_key_check(
        model="anthropic/claude-sonnet-4-5", provider="anthropic", api_key=None, api_base=None
    )


# preflight: DEMO_LLM_MODEL, before anything else of `make run`


@pytest.fixture
def preflight(tmp_path):
    """``manage.py preflight`` in a fresh process, on a free port and a database that answers (an
    SQLite file): only DEMO_LLM_MODEL can fail it."""

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        clean = {key: value for key, value in os.environ.items() if key != "DEMO_LLM_MODEL"}
        clean.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            PORT=str(port),
            DATABASE_URL=f"sqlite:///{tmp_path / 'preflight.sqlite3'}",
        )
        return python_run(["manage.py", "preflight"], {**clean, **env})

    return run


def _one_line(result) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    return line


def test_preflight_refuses_a_demo_model_litellm_cannot_route_in_one_line(preflight):
    line = _one_line(preflight(DEMO_LLM_MODEL="opneai/gpt-4o"))

    assert line == "DEMO_LLM_MODEL: " + MODEL_STRING_UNKNOWN_PROVIDER.format(
        model="'opneai/gpt-4o'", hint=" (did you mean openai/?)"
    )


def test_preflight_refuses_a_huge_demo_model_in_one_short_line(preflight):
    line = _one_line(preflight(DEMO_LLM_MODEL="openai/" + "x" * 100_000))

    assert line.startswith("DEMO_LLM_MODEL: The language model is 100007 characters long")
    assert len(line) < 200


def test_preflight_passes_a_custom_model_without_its_key(preflight):
    result = preflight(DEMO_LLM_MODEL="openai/my-local-model", OPENAI_API_KEY="")

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


# The admin form


def test_the_admin_refuses_a_model_string_with_the_preflight_message(client, operator, tenant):
    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant, model="gpt4"))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["model"] == [
        MODEL_STRING_UNKNOWN_PROVIDER.format(model="'gpt4'", hint="")
    ]
    assert not LanguageModel.objects.exists()


@pytest.mark.parametrize(
    ("model", "error"),
    [
        pytest.param("openai/gpt\x00", "Null characters are not allowed.", id="nul"),
        pytest.param("openai/" + "x" * 10_000, "Ensure this value has at most 200 characters", id="huge"),
        pytest.param("openai/gpt 4o", "contains spaces, control or non-ASCII characters", id="space"),
        pytest.param("openai/gpt\u202e", "contains spaces, control or non-ASCII characters", id="bidi"),
        # Invalid UTF-8 in the body arrives as U+FFFD, which is refused like any non-ASCII.
        pytest.param(
            b"openai/gpt\xff\xfe", "contains spaces, control or non-ASCII characters", id="invalid-utf8"
        ),
    ],
)
def test_the_admin_refuses_hostile_model_strings_as_form_errors(client, operator, tenant, model, error):
    body = urlencode(model_form(tenant, model=model), doseq=True)
    response = client.post(
        admin_url(LanguageModel, "add"), body, content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 200
    [message] = response.context["adminform"].form.errors["model"]
    assert error in message
    assert not LanguageModel.objects.exists()


def test_the_admin_saves_a_model_without_a_key_and_says_what_is_missing(client, operator, tenant, no_keys):
    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant), follow=True)

    assert LanguageModel.objects.get().model == "openai/gpt-4o-mini"
    [message] = [m for m in response.context["messages"] if m.level_tag == "warning"]
    assert str(message) == KEY_MISSING_NOW.format(
        name="Main", message=LLM_MISSING_KEY.format(provider="openai", variables="OPENAI_API_KEY")
    )
    assert escape(str(message)) in response.content.decode()


def test_the_admin_says_nothing_of_a_key_it_was_given(client, operator, tenant, no_keys):
    response = client.post(
        admin_url(LanguageModel, "add"), model_form(tenant, api_key="sk-typed"), follow=True
    )

    assert [m.level_tag for m in response.context["messages"]] == ["success"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("admin_model_test")
def test_testing_a_model_without_a_key_names_the_variable_at_once(
    client, operator, tenant, no_keys, settings
):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": None}
    language_model = LanguageModel.objects.create(tenant=tenant, name="Main", model="openai/gpt-4o-mini")

    response = post_action(client, LanguageModel, "test_model", [language_model])

    [message] = list(response.context["messages"])
    assert message.level_tag == "error"
    assert str(message) == "Main: " + LLM_MISSING_KEY.format(provider="openai", variables="OPENAI_API_KEY")

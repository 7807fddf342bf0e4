"""Structured output: the schema checked and completed before any call, the answer held to it after
(a mismatch is an error, never a silent pass), and DeepSeek's emulated JSON mode parsing what the
model wrapped in prose and code fences."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput, StructuredOutputInvalid
from language_models.model_checks import litellm_import
from language_models.models import LlmUsage, UsageOutcome
from llm_gateway.capabilities import model_json_mode, model_structured_output
from llm_gateway.invoke import llm_gateway_invoke
from llm_gateway.structured import (
    JSON_INSTRUCTION,
    response_schema_prepare,
    structured_output_parse,
    structured_request_build,
)
from tests.llm_gateway.conftest import invoke_request
from tests.support.factories import LanguageModelFactory

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
}
MESSAGES = [{"role": "user", "content": "The largest city of France?"}]


@pytest.fixture(scope="module", autouse=True)
def _litellm_loaded() -> None:
    litellm_import()


# The schema, before any call


def test_an_object_root_without_additional_properties_gets_false():
    prepared = response_schema_prepare(schema=CITY)

    assert prepared["additionalProperties"] is False
    assert "additionalProperties" not in CITY


def test_an_explicit_additional_properties_is_kept():
    assert (
        response_schema_prepare(schema={**CITY, "additionalProperties": True})["additionalProperties"] is True
    )


def test_a_non_object_root_is_left_as_it_is():
    assert response_schema_prepare(schema={"type": "array", "items": {"type": "string"}}) == {
        "type": "array",
        "items": {"type": "string"},
    }


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "no-such-type"},
        {"type": "object", "properties": {"a": {"minLength": -1}}},
        {"type": "object", "required": "city"},
    ],
    ids=["unknown-type", "negative-bound", "required-not-a-list"],
)
def test_a_schema_that_is_not_a_json_schema_is_refused_naming_the_field(schema):
    with pytest.raises(InvalidInput) as refused:
        response_schema_prepare(schema=schema)

    assert refused.value.data is not None
    assert refused.value.data["field"] == "response_schema"


def test_a_remote_reference_is_refused():
    with pytest.raises(InvalidInput) as refused:
        response_schema_prepare(schema={"$ref": "https://example.com/schema.json"})

    assert refused.value.data == {"field": "response_schema"}


def test_a_schema_too_deep_or_too_large_is_refused():
    deep: dict = {"type": "string"}
    for _ in range(5000):
        deep = {"type": "object", "properties": {"a": deep}}
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(20_000)}}
    long_string = {"type": "string", "description": "x" * 100_000}

    for schema in (deep, wide, long_string):
        with pytest.raises(InvalidInput) as refused:
            response_schema_prepare(schema=schema)
        assert refused.value.data == {"field": "response_schema"}


# What is sent


def test_a_model_that_enforces_schemas_gets_it_as_strict_response_format():
    schema = response_schema_prepare(schema=CITY)

    built = structured_request_build(
        messages=MESSAGES, schema=schema, json_mode=False, structured_output=True, native_json_mode=True
    )

    assert built.native
    assert built.messages == MESSAGES
    assert built.response_format == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema, "strict": True},
    }


def test_a_schema_with_optional_or_open_objects_is_sent_without_strict():
    optional = response_schema_prepare(
        schema={"type": "object", "properties": {"city": {"type": "string"}, "note": {"type": "string"}}}
    )
    nested_open = response_schema_prepare(
        schema={
            "type": "object",
            "properties": {"place": {"type": "object", "properties": {"city": {"type": "string"}}}},
            "required": ["place"],
        }
    )

    for schema in (optional, nested_open):
        built = structured_request_build(
            messages=MESSAGES, schema=schema, json_mode=False, structured_output=True, native_json_mode=True
        )
        assert built.response_format is not None
        assert built.response_format["json_schema"]["strict"] is False


def test_other_models_get_an_instruction_and_json_mode_where_they_have_it():
    schema = response_schema_prepare(schema=CITY)

    with_json_mode = structured_request_build(
        messages=MESSAGES, schema=schema, json_mode=False, structured_output=False, native_json_mode=True
    )
    without = structured_request_build(
        messages=MESSAGES, schema=None, json_mode=True, structured_output=False, native_json_mode=False
    )

    assert with_json_mode.response_format == {"type": "json_object"}
    assert with_json_mode.messages[0]["role"] == "system"
    assert '"additionalProperties": false' in with_json_mode.messages[0]["content"]
    assert with_json_mode.messages[1:] == MESSAGES
    assert without.response_format is None
    assert without.messages == [{"role": "system", "content": JSON_INSTRUCTION}, *MESSAGES]


def test_litellm_says_which_providers_enforce_schemas_and_deepseek_is_emulated():
    assert model_structured_output(provider="openai", model="openai/gpt-4o-mini")
    assert not model_structured_output(provider="deepseek", model="deepseek/deepseek-chat")
    assert not model_json_mode(provider="deepseek", model="deepseek/deepseek-chat")
    assert not model_structured_output(provider="openai", model="openai/no-such-model-anywhere")


# What comes back


def test_an_answer_in_prose_and_fences_is_parsed_when_json_was_asked_for():
    text = 'Sure! Here it is:\n```json\n{"city": "Paris", "population": 2100000}\n```\nAnything else?'

    assert structured_output_parse(text=text, schema=None, json_mode=True) == {
        "city": "Paris",
        "population": 2100000,
    }


def test_a_mismatch_names_the_path_and_constraint_but_never_the_output():
    schema = response_schema_prepare(schema=CITY)

    with pytest.raises(StructuredOutputInvalid) as refused:
        structured_output_parse(
            text='{"city": "Paris", "population": "output-marker"}', schema=schema, json_mode=False
        )

    assert refused.value.api_code == "invalid_structured_output"
    assert refused.value.http_status == 502
    assert refused.value.data is not None
    assert refused.value.data["path"] == "/population"
    assert refused.value.data["keyword"] == "type"
    assert "output-marker" not in refused.value.message
    assert "output-marker" not in repr(refused.value.data)


def test_an_answer_that_is_not_json_at_all_is_an_error():
    with pytest.raises(StructuredOutputInvalid):
        structured_output_parse(text="I would rather not say.", schema=CITY, json_mode=False)


def test_nan_and_infinity_are_not_json():
    assert structured_output_parse(text='{"a": NaN}', schema=None, json_mode=False) == '{"a": NaN}'
    for text in ('{"a": NaN}', "Here: [Infinity]"):
        with pytest.raises(StructuredOutputInvalid):
            structured_output_parse(text=text, schema=None, json_mode=True)


def test_an_answer_nested_too_deep_is_an_error_not_a_crash():
    with pytest.raises(StructuredOutputInvalid):
        structured_output_parse(text="[" * 100_000, schema=None, json_mode=True)
    with pytest.raises(StructuredOutputInvalid):
        structured_output_parse(text="Here: " + "[" * 100_000 + "]" * 100_000, schema=None, json_mode=True)


# Through the gateway


@pytest.mark.django_db(transaction=True)
async def test_an_answer_matching_the_schema_comes_back_parsed(caller, stored_openai, llm_script):
    llm_script({"gateway": '{"city": "Paris", "population": 2100000}'})

    response = await llm_gateway_invoke(
        identity=caller, request=invoke_request(response_schema=CITY), header_key=None, channel="api"
    )

    assert response.output == {"city": "Paris", "population": 2100000}
    usage = await LlmUsage.objects.aget(pk=response.id)
    assert usage.structured


@pytest.mark.django_db(transaction=True)
async def test_an_answer_breaking_the_schema_is_an_error_and_its_tokens_are_recorded(
    caller, stored_openai, llm_script
):
    llm_script({"gateway": '{"city": "Paris", "population": 2100000, "mayor": "extra"}'})

    with pytest.raises(StructuredOutputInvalid) as refused:
        await llm_gateway_invoke(
            identity=caller, request=invoke_request(response_schema=CITY), header_key=None, channel="api"
        )

    assert refused.value.data is not None
    assert refused.value.data["keyword"] == "additionalProperties"
    usage = await LlmUsage.objects.aget()
    assert (usage.outcome, usage.error_code) == (UsageOutcome.ERROR, "invalid_structured_output")
    assert usage.total_tokens > 0


@pytest.mark.django_db(transaction=True)
async def test_an_invalid_schema_is_refused_before_any_call_and_leaves_no_record(
    caller, stored_openai, llm_script
):
    llm_script({"gateway": "never sent"})

    with pytest.raises(InvalidInput) as refused:
        await llm_gateway_invoke(
            identity=caller,
            request=invoke_request(response_schema={"type": 12}),
            header_key=None,
            channel="api",
        )

    assert refused.value.data is not None
    assert refused.value.data["field"] == "response_schema"
    assert await LlmUsage.objects.acount() == 0


@pytest.fixture
def stored_deepseek(tenant):
    return LanguageModelFactory(
        tenant=tenant, name="Deep", model="deepseek/deepseek-chat", api_key="sk-deepseek-0123456789"
    )


@pytest.mark.django_db(transaction=True)
async def test_deepseek_json_mode_parses_a_reply_wrapped_in_prose_and_fences(
    caller, stored_deepseek, llm_script
):
    llm_script(
        {
            "gateway": [
                'Of course! Here is the JSON you asked for:\n```json\n{"city": "Paris"}\n```\nLet me know.',
                "Sorry, I cannot answer that.",
            ]
        }
    )
    request = invoke_request(provider="deepseek", model="deepseek-chat", extra={"json_mode": True})

    response = await llm_gateway_invoke(identity=caller, request=request, header_key=None, channel="api")
    with pytest.raises(StructuredOutputInvalid):
        await llm_gateway_invoke(identity=caller, request=request, header_key=None, channel="api")

    assert response.output == {"city": "Paris"}
    assert (response.provider, response.model) == ("deepseek", "deepseek-chat")

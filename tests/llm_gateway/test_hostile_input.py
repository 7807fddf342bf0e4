"""Hostile input to the gateway: options that would hand over the server, text no provider can be
sent, and values built to be huge or deep. Each is refused naming its field, before any budget,
record or call; none is a crash."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from language_models.models import LlmUsage
from llm_gateway.invoke import llm_gateway_invoke
from llm_gateway.options import extra_options_check
from llm_gateway.schemas import Message
from tests.llm_gateway.conftest import invoke_request


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "api_base",
        "base_url",
        "mock_response",
        "custom_llm_provider",
        "metadata",
        "callbacks",
        "tools",
        "response_format",
        "n",
        "\x00",
        "\ud800",
    ],
)
def test_an_option_outside_the_allowlist_is_refused_naming_it(key):
    with pytest.raises(InvalidInput) as refused:
        extra_options_check(extra={key: "x"})

    assert refused.value.data is not None
    field = refused.value.data["field"]
    assert field.startswith("extra.")
    assert "\x00" not in field
    assert "\ud800" not in field


def test_allowed_options_pass_through_and_json_mode_is_kept_apart():
    checked = extra_options_check(
        extra={
            "top_p": 0.9,
            "top_k": 40,
            "stop": ["\n\n"],
            "seed": 7,
            "presence_penalty": 0.5,
            "frequency_penalty": -0.5,
            "reasoning_effort": "low",
            "user": "end-user-42",
            "logit_bias": {"50256": -100},
            "json_mode": True,
        }
    )

    assert checked.json_mode is True
    assert "json_mode" not in checked.options
    assert checked.options["top_p"] == 0.9
    assert checked.options["logit_bias"] == {"50256": -100}


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"top_p": 2}, "extra.top_p"),
        ({"top_p": True}, "extra.top_p"),
        ({"top_k": 1.5}, "extra.top_k"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "extra.stop"),
        ({"stop": [1]}, "extra.stop"),
        ({"seed": 2**70}, "extra.seed"),
        ({"reasoning_effort": "maximum"}, "extra.reasoning_effort"),
        ({"user": ""}, "extra.user"),
        ({"logit_bias": {"not-a-token": 1}}, "extra.logit_bias"),
        ({"json_mode": "yes"}, "extra.json_mode"),
    ],
)
def test_an_allowed_option_with_a_bad_value_is_refused_naming_it(extra, field):
    with pytest.raises(InvalidInput) as refused:
        extra_options_check(extra=extra)

    assert refused.value.data == {"field": field}


def test_huge_or_deep_extra_is_refused_without_recursing():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]

    for extra in ({"stop": deep}, {"user": "x" * 1_000_000}, {f"k{i}": 1 for i in range(10_000)}):
        with pytest.raises(InvalidInput) as refused:
            extra_options_check(extra=extra)
        assert refused.value.data == {"field": "extra"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "content", ["before\x00after", "lone \ud800 surrogate", "\udfff"], ids=["nul", "high", "low"]
)
async def test_message_text_no_provider_can_be_sent_is_refused_naming_the_message(
    caller, stored_openai, llm_script, content
):
    llm_script({"gateway": "never sent"})
    # Pydantic refuses a lone surrogate in a str field itself; built without it, as a channel that
    # parsed the JSON some other way would, the service still refuses it.
    request = invoke_request().model_copy(
        update={
            "messages": [
                Message(role="system", content="Be brief."),
                Message.model_construct(role="user", content=content),
            ]
        }
    )

    with pytest.raises(InvalidInput) as refused:
        await llm_gateway_invoke(identity=caller, request=request, header_key=None, channel="api")

    assert refused.value.data == {"field": "messages[1].content"}
    assert await LlmUsage.objects.acount() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"response_schema": {"type": "object", "description": "\x00"}}, "response_schema"),
        ({"response_schema": {"type": "object", "properties": {"\ud800": {}}}}, "response_schema"),
        ({"model": "gpt-4o\x00"}, "model"),
        ({"model": "gpt\n4o"}, "model"),
        ({"provider": "nosuchprovider"}, "provider"),
        ({"extra": {"api_base": "https://attacker.example"}}, "extra.api_base"),
        ({"extra": {"mock_response": "free answers"}}, "extra.mock_response"),
    ],
)
async def test_hostile_fields_are_refused_before_any_record(
    caller, stored_openai, llm_script, overrides, field
):
    llm_script({"gateway": "never sent"})

    with pytest.raises(InvalidInput) as refused:
        await llm_gateway_invoke(
            identity=caller, request=invoke_request(**overrides), header_key=None, channel="api"
        )

    assert refused.value.data is not None
    assert refused.value.data["field"] == field
    assert await LlmUsage.objects.acount() == 0


@pytest.mark.django_db(transaction=True)
async def test_a_huge_or_deep_schema_is_refused_through_the_gateway(caller, stored_openai, llm_script):
    llm_script({"gateway": "never sent"})
    deep: dict = {"type": "string"}
    for _ in range(2000):
        deep = {"type": "array", "items": deep}
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(50_000)}}

    for schema in (deep, huge):
        with pytest.raises(InvalidInput) as refused:
            await llm_gateway_invoke(
                identity=caller,
                request=invoke_request(response_schema=schema),
                header_key=None,
                channel="api",
            )
        assert refused.value.data == {"field": "response_schema"}


@pytest.mark.django_db(transaction=True)
async def test_an_unknown_channel_is_a_programming_error(caller):
    with pytest.raises(ValueError, match="channel"):
        await llm_gateway_invoke(identity=caller, request=invoke_request(), header_key=None, channel="web")

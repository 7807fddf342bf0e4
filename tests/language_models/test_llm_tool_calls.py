"""Tool calling and structured output through llm_complete_tools / llm_complete, on litellm's real
code path: the script player answers with litellm's own ``mock_tool_calls`` and ``mock_response``."""

from __future__ import annotations

import json

import pytest

from core.errors import NotReady, Unavailable
from language_models.completion import (
    LLM_EMPTY_ANSWER,
    TOOL_ARGUMENTS_NOT_JSON,
    TOOL_ARGUMENTS_NOT_OBJECT,
    ToolCall,
    ToolCompletion,
    llm_complete,
    llm_complete_tools,
)
from language_models.scripted import LlmMockScriptError
from tests.support.llm_script_support import llm_script, model_config, script_remaining

__all__ = ["llm_script"]


async def _tools_call() -> ToolCompletion:
    return await llm_complete_tools(config=model_config(), messages=MESSAGES, tools=TOOLS, purpose="agent")


MESSAGES = [{"role": "user", "content": "Which products are books?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "catalogue__ListProducts",
            "description": "Lists products.",
            "parameters": {"type": "object", "properties": {"category": {"type": "string"}}, "required": []},
        },
    }
]


async def test_scripted_tool_calls_come_back_with_ids_names_and_arguments(llm_script):
    llm_script(
        {
            "agent": {
                "toolCalls": [
                    {"name": "catalogue__ListProducts", "arguments": {"category": "Books"}},
                    {"name": "catalogue__ListProducts", "arguments": {}},
                ],
                "text": "Looking.",
            }
        }
    )

    completion = await _tools_call()

    assert isinstance(completion, ToolCompletion)
    assert completion.text == "Looking."
    assert [(call.name, call.arguments, call.error) for call in completion.tool_calls] == [
        ("catalogue__ListProducts", {"category": "Books"}, None),
        ("catalogue__ListProducts", {}, None),
    ]
    ids = [call.id for call in completion.tool_calls]
    assert all(ids)
    assert len(set(ids)) == 2
    assert completion.model == "openai/gpt-4o-mini"
    assert completion.prompt_tokens > 0
    assert completion.completion_tokens > 0


async def test_a_plain_text_answer_has_no_tool_calls(llm_script):
    llm_script({"agent": "There are three books."})

    completion = await _tools_call()

    assert completion.text == "There are three books."
    assert completion.tool_calls == ()


async def test_tool_calls_without_text_have_empty_text(llm_script):
    llm_script({"agent": {"toolCalls": [{"name": "catalogue__ListProducts"}]}})

    completion = await _tools_call()

    assert completion.text == ""
    assert completion.tool_calls[0].arguments == {}


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        pytest.param("{not json", TOOL_ARGUMENTS_NOT_JSON, id="not-json"),
        pytest.param("[1, 2]", TOOL_ARGUMENTS_NOT_OBJECT, id="a-list"),
        pytest.param('"text"', TOOL_ARGUMENTS_NOT_OBJECT, id="a-string"),
        pytest.param("[" * 100_000 + "]" * 100_000, TOOL_ARGUMENTS_NOT_JSON, id="deep"),
    ],
)
async def test_arguments_that_are_no_json_object_are_the_models_mistake_not_a_crash(llm_script, raw, error):
    llm_script({"agent": {"toolCalls": [{"name": "catalogue__ListProducts", "arguments": raw}]}})

    completion = await _tools_call()

    assert completion.tool_calls == (
        ToolCall(id=completion.tool_calls[0].id, name="catalogue__ListProducts", arguments={}, error=error),
    )


async def test_a_list_of_tool_call_items_is_consumed_in_order(llm_script):
    path = llm_script(
        {"agent": [{"toolCalls": [{"name": "a__B", "arguments": {"x": 1}}]}, "done"]},
    )

    first = await _tools_call()
    second = await _tools_call()

    assert first.tool_calls[0].arguments == {"x": 1}
    assert (second.text, second.tool_calls) == ("done", ())
    assert script_remaining(path, "agent") == ["done"]


async def test_failures_are_translated_as_for_llm_complete(llm_script):
    llm_script({"agent": [{"error": "RateLimitError"}, {"error": "AuthenticationError"}]})

    with pytest.raises(Unavailable) as limited:
        await _tools_call()
    with pytest.raises(NotReady) as refused:
        await _tools_call()

    assert limited.value.data == {"reason": "llm_rate_limited", "retryAfterSeconds": 30}
    assert refused.value.data == {"reason": "llm_credentials_refused"}


async def test_an_answer_with_neither_text_nor_tool_calls_is_unavailable(llm_script):
    llm_script({"agent": ""})

    with pytest.raises(Unavailable) as raised:
        await _tools_call()

    assert raised.value.message == LLM_EMPTY_ANSWER.format(model="openai/gpt-4o-mini")


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param({"toolCalls": []}, id="no-calls"),
        pytest.param({"toolCalls": "x"}, id="not-a-list"),
        pytest.param({"toolCalls": [{"arguments": {}}]}, id="no-name"),
        pytest.param({"toolCalls": [{"name": "a", "arguments": 3}]}, id="bad-arguments"),
        pytest.param({"toolCalls": [{"name": "a", "extra": 1}]}, id="unknown-key"),
        pytest.param({"toolCalls": [{"name": "a"}], "text": 5}, id="text-not-a-string"),
        pytest.param({"toolCalls": [{"name": "a"}], "other": 1}, id="unknown-item-key"),
    ],
)
async def test_a_malformed_tool_call_item_is_refused(llm_script, entry):
    llm_script({"agent": entry})

    with pytest.raises(LlmMockScriptError, match="invalid response for the purpose 'agent'"):
        await _tools_call()


@pytest.mark.parametrize(
    "response_format",
    [
        pytest.param({"type": "json_object"}, id="json-object"),
        pytest.param(
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "mapping",
                    "schema": {"type": "object", "properties": {"command": {"type": "string"}}},
                },
            },
            id="json-schema",
        ),
    ],
)
@pytest.mark.parametrize(
    "model", ["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest", "ollama/llama3"]
)
async def test_structured_output_is_asked_for_and_answered(llm_script, response_format, model):
    llm_script({"structured": json.dumps({"command": "catalogue/ListProducts"})})

    completion = await llm_complete(
        config=model_config(model=model),
        messages=MESSAGES,
        purpose="structured",
        response_format=response_format,
    )

    assert json.loads(completion.text) == {"command": "catalogue/ListProducts"}

"""A conversation's topic and summary: written by the model in one structured call (any failure is
Unavailable, so nothing rotates), or derived from the turns without one."""

from __future__ import annotations

import json

import pytest

from conversations.summaries import (
    EMPTY_SUMMARY,
    EMPTY_TOPIC,
    PURPOSE,
    SUMMARY_MAX_CHARS,
    TOPIC_MAX_CHARS,
    conversation_summary_write,
)
from core.errors import NotReady, Timeout, Unavailable
from tests.support.llm_script_support import (  # noqa: F401  (a fixture)
    UNRECORDED_USE,
    llm_script,
    model_config,
    unrecorded_model_calls,
)

__all__ = ["llm_script"]

TURNS = [
    {
        "kind": "assistant",
        "request": "list products Books",
        "command_name": "catalogue/ListProducts",
        "success": True,
    },
    {"kind": "command", "request": "orders/Recent", "command_name": "orders/Recent", "success": True},
    {
        "kind": "agent",
        "request": "Which book sells best?",
        "command_name": "catalogue/ListProducts",
        "success": False,
    },
]

pytestmark = pytest.mark.usefixtures("unrecorded_model_calls")


async def test_without_a_model_the_topic_and_summary_are_derived():
    topic, summary, derived = await conversation_summary_write(use=UNRECORDED_USE, config=None, turns=TURNS)

    assert derived is True
    assert topic == "list products Books"
    assert summary == (
        "3 turns: first request 'list products Books'; commands run: catalogue/ListProducts, orders/Recent"
    )


async def test_a_derived_topic_is_cut_at_a_word_boundary():
    request = "Please list every product of the category science fiction that costs less than ten euros"
    topic, summary, _ = await conversation_summary_write(
        use=UNRECORDED_USE,
        config=None,
        turns=[{"kind": "agent", "request": request, "command_name": "", "success": True}],
    )

    assert len(topic) <= 60
    assert topic.endswith("…")
    assert request.startswith(topic[:-1])
    assert request[len(topic) - 1] == " "
    assert summary.startswith("1 turn: ")
    assert summary.endswith("commands run: none")


@pytest.mark.parametrize("config", [None, model_config()])
async def test_no_turns_is_an_empty_conversation(config, llm_script):
    llm_script({})  # no model call is made

    assert await conversation_summary_write(use=UNRECORDED_USE, config=config, turns=[]) == (
        EMPTY_TOPIC,
        EMPTY_SUMMARY,
        True,
    )


async def test_hostile_requests_give_a_clean_derived_topic():
    turns = [{"kind": "agent", "request": "a\x00b\ud800c\n\nd" + "x" * 100_000, "command_name": None}]

    topic, summary, _ = await conversation_summary_write(use=UNRECORDED_USE, config=None, turns=turns)

    assert topic == "abc…"
    assert "\x00" not in topic + summary
    assert len(topic) <= 60
    assert len(summary) <= SUMMARY_MAX_CHARS


async def test_the_model_writes_topic_and_summary(llm_script):
    llm_script({PURPOSE: json.dumps({"topic": "Book sales", "summary": "Listed books and recent orders."})})

    assert await conversation_summary_write(use=UNRECORDED_USE, config=model_config(), turns=TURNS) == (
        "Book sales",
        "Listed books and recent orders.",
        False,
    )


async def test_what_the_model_writes_is_bounded_and_cleaned(llm_script):
    answer = {
        "topic": "Book\x00 sales\nand\tmore " + "t" * 200,
        "summary": "S\x07um\ud800mary " + "s" * 5_000,
    }
    llm_script({PURPOSE: json.dumps(answer)})

    topic, summary, derived = await conversation_summary_write(
        use=UNRECORDED_USE, config=model_config(), turns=TURNS
    )

    assert topic.startswith("Book sales and more ")
    assert len(topic) <= TOPIC_MAX_CHARS
    assert "\n" not in topic
    assert summary.startswith("Summary ")
    assert len(summary) <= SUMMARY_MAX_CHARS
    assert derived is False


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[" * 50_000, id="deep"),
        pytest.param(json.dumps(["topic", "summary"]), id="a-list"),
        pytest.param(json.dumps({"topic": "Only a topic"}), id="no-summary"),
        pytest.param(json.dumps({"topic": 5, "summary": "x"}), id="topic-not-a-string"),
        pytest.param(json.dumps({"topic": "\x00\x01 ", "summary": "x"}), id="topic-empty-once-cleaned"),
    ],
)
async def test_an_unusable_answer_is_unavailable(llm_script, answer):
    llm_script({PURPOSE: answer})

    with pytest.raises(Unavailable) as raised:
        await conversation_summary_write(use=UNRECORDED_USE, config=model_config(), turns=TURNS)

    assert raised.value.jsonrpc_code == -32005
    assert raised.value.data == {"reason": "llm_bad_summary"}


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        pytest.param("ServiceUnavailableError", Unavailable, id="unavailable"),
        pytest.param("AuthenticationError", NotReady, id="not-ready"),
        pytest.param("Timeout", Timeout, id="timeout"),
    ],
)
async def test_a_model_failure_keeps_its_class(llm_script, error, kind):
    llm_script({PURPOSE: {"error": error}})

    with pytest.raises(kind):
        await conversation_summary_write(use=UNRECORDED_USE, config=model_config(), turns=TURNS)


async def test_any_other_failure_of_the_call_is_unavailable(llm_script):
    llm_script({})  # the script player cannot answer: a GatehouseError that is none of the three

    with pytest.raises(Unavailable) as raised:
        await conversation_summary_write(use=UNRECORDED_USE, config=model_config(), turns=TURNS)

    assert raised.value.data == {"reason": "llm_summary_failed"}

"""The assistant's mapping of a request to exactly one command text: without a model (syntax, a
named command and its parameters, or a refusal with close commands) and with one structured call."""

from __future__ import annotations

import json

import pytest

from core.errors import NotReady
from tests.support.llm_script_support import (  # noqa: F401  (a fixture)
    UNRECORDED_USE,
    llm_script,
    model_config,
    unrecorded_model_calls,
)
from workflows.assistant import PURPOSE, AssistantMapping, assistant_map_plain, assistant_map_with_model
from workflows.catalogue import CommandInfo, ParameterInfo
from workflows.syntax import command_parse

__all__ = ["llm_script"]

COMMANDS = [
    CommandInfo(
        qualified_name="catalogue/ListProducts",
        description="Lists the products of a category.",
        parameters=(
            ParameterInfo(name="category", type="string", required=True),
            ParameterInfo(name="limit", type="integer", required=False),
        ),
    ),
    CommandInfo(
        qualified_name="catalogue/ListCategories",
        description="Lists every product category.",
    ),
    CommandInfo(
        qualified_name="catalogue/ProductPrice",
        description="The price of one product.",
        parameters=(
            ParameterInfo(name="product_id", type="integer", required=True),
            ParameterInfo(name="currency", type="string", required=True),
        ),
    ),
    CommandInfo(
        qualified_name="catalogue/go_to_context",
        description="Moves to another context.",
        parameters=(ParameterInfo(name="context", type="string", required=True),),
    ),
    CommandInfo(qualified_name="catalogue/List", description="Lists things."),
]

pytestmark = pytest.mark.usefixtures("unrecorded_model_calls")


def _plain(query: str) -> AssistantMapping:
    return assistant_map_plain(query=query, commands=COMMANDS)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param(
            "catalogue/ListProducts <category>Books</category>",
            "catalogue/ListProducts <category>Books</category>",
            id="syntax",
        ),
        pytest.param(
            "  /catalogue/ListProducts <category>Books</category> ",
            "catalogue/ListProducts <category>Books</category>",
            id="leading-slash",
        ),
        pytest.param("orders/Unknown <x>1</x>", "orders/Unknown <x>1</x>", id="syntax-of-an-unknown-command"),
        pytest.param("ListCategories", "catalogue/ListCategories", id="bare-name"),
        pytest.param("/listcategories", "catalogue/ListCategories", id="bare-name-any-case"),
        pytest.param("list categories", "catalogue/ListCategories", id="words"),
        pytest.param("list_categories", "catalogue/ListCategories", id="underscores"),
        pytest.param("Catalogue/ListCategories", "catalogue/ListCategories", id="qualified-any-case"),
        pytest.param("List", "catalogue/List", id="a-name-that-prefixes-others"),
        pytest.param(
            "list products category=Books limit=3",
            "catalogue/ListProducts <category>Books</category> <limit>3</limit>",
            id="name-equals-value",
        ),
        pytest.param(
            "ProductPrice product_id: 7, currency: EUR",
            "catalogue/ProductPrice <product_id>7</product_id> <currency>EUR</currency>",
            id="name-colon-value",
        ),
        pytest.param(
            'ListProducts category="Science fiction"',
            "catalogue/ListProducts <category>Science fiction</category>",
            id="quoted-pair",
        ),
        pytest.param(
            "list products Science fiction",
            "catalogue/ListProducts <category>Science fiction</category>",
            id="single-required-parameter",
        ),
        pytest.param(
            "list products: 'Books'",
            "catalogue/ListProducts <category>Books</category>",
            id="single-parameter-quoted",
        ),
        pytest.param(
            "go to context orders", "catalogue/go_to_context <context>orders</context>", id="built-in"
        ),
    ],
)
def test_a_request_that_names_one_command_is_mapped(query, expected):
    mapping = _plain(query)

    assert mapping.command_text == expected, mapping.reason
    assert command_parse(text=mapping.command_text)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        pytest.param(
            "ProductPrice 7 EUR", "could not be matched to its parameters", id="two-required-no-names"
        ),
        pytest.param("ProductPrice product_id=7", "needs currency", id="missing-required"),
        pytest.param("list products", "needs category", id="missing-single-required"),
        pytest.param("ListCategories Books", "takes no parameters", id="extra-words"),
        pytest.param("list products x category=Books", "could not be matched", id="words-before-pairs"),
        pytest.param("list products category=A category=B", "given twice", id="twice"),
        pytest.param("list products a</category>b", "contains </category>", id="value-syntax-cannot-carry"),
    ],
)
def test_a_named_command_with_unclear_parameters_is_refused(query, reason):
    mapping = _plain(query)

    assert mapping.command_text is None
    assert reason in mapping.reason
    assert mapping.close_commands


def test_an_unknown_request_is_refused_with_close_commands():
    mapping = _plain("show me the product prices")

    assert mapping.command_text is None
    assert "names no command" in mapping.reason
    assert "catalogue/ProductPrice" in mapping.close_commands
    assert len(mapping.close_commands) <= 5


def test_several_commands_with_the_same_name_are_ambiguous():
    commands = [
        *COMMANDS,
        CommandInfo(qualified_name="orders/ListCategories", description="Order categories."),
    ]

    mapping = assistant_map_plain(query="list categories", commands=commands)

    assert mapping.command_text is None
    assert "several commands" in mapping.reason
    assert set(mapping.close_commands) == {"catalogue/ListCategories", "orders/ListCategories"}


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param(" / ", "empty", id="only-a-slash"),
        pytest.param("ListCategories\x00", "NUL", id="nul"),
        pytest.param("list products \ud800", "surrogate", id="lone-surrogate"),
        pytest.param("list products " + "x" * 100_000, "longer than", id="huge"),
    ],
)
def test_hostile_requests_are_refused_not_crashed_on(query, reason):
    mapping = _plain(query)

    assert mapping.command_text is None
    assert reason in mapping.reason


def test_a_long_unknown_request_is_refused_quickly_with_bounded_fuzzy_matching():
    mapping = _plain("please " * 500)

    assert mapping.command_text is None


async def _with_model(query: str = "price of product 7 in euros") -> AssistantMapping:
    return await assistant_map_with_model(
        use=UNRECORDED_USE, config=model_config(), query=query, commands=COMMANDS, context="catalogue"
    )


async def test_the_model_maps_a_request_to_one_command(llm_script):
    llm_script(
        {
            PURPOSE: json.dumps(
                {"command": "catalogue/ProductPrice", "parameters": {"product_id": 7, "currency": "EUR"}}
            )
        }
    )

    mapping = await _with_model()

    assert (
        mapping.command_text == "catalogue/ProductPrice <product_id>7</product_id> <currency>EUR</currency>"
    )


async def test_a_fenced_json_answer_is_accepted(llm_script):
    llm_script({PURPOSE: '```json\n{"command": "catalogue/ListCategories", "parameters": {}}\n```'})

    mapping = await _with_model()

    assert mapping.command_text == "catalogue/ListCategories"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        pytest.param("not json at all", "not JSON", id="not-json"),
        pytest.param("[1]", "not an object", id="a-list"),
        pytest.param("[" * 50_000, "not JSON", id="deep"),
        pytest.param(json.dumps({"command": "orders/Nope"}), "names no command", id="unknown-command"),
        pytest.param(json.dumps({"command": 5}), "names no command", id="command-not-a-string"),
        pytest.param(
            json.dumps({"command": "catalogue/ListProducts", "parameters": {"colour": "red"}}),
            "has no parameter colour",
            id="unknown-parameter",
        ),
        pytest.param(
            json.dumps({"command": "catalogue/ListProducts", "parameters": ["Books"]}),
            "not an object",
            id="parameters-not-an-object",
        ),
        pytest.param(
            json.dumps({"command": None, "reason": "Which product?\x00"}),
            "found no command for this request: Which product?",
            id="no-command",
        ),
    ],
)
async def test_an_unusable_model_answer_is_a_refusal_not_a_crash(llm_script, answer, reason):
    llm_script({PURPOSE: answer})

    mapping = await _with_model()

    assert mapping.command_text is None
    assert reason in mapping.reason
    assert "\x00" not in mapping.reason


async def test_the_model_is_called_once_and_its_failures_propagate(llm_script):
    llm_script({PURPOSE: {"error": "AuthenticationError"}})

    with pytest.raises(NotReady):
        await _with_model()


async def test_a_hostile_request_never_reaches_the_model(llm_script):
    llm_script({})  # a call would fail: the script has no answer for the purpose

    mapping = await _with_model("x\x00")

    assert mapping.command_text is None

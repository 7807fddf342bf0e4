"""The agent loop on litellm's real code path: the script player plays the model (tool calls, then
a final text); ``run_command`` is a fake workflow that records the command texts it is given."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.errors import InsufficientScope, InvalidInput, NotFound, Unavailable
from language_models.completion import TOOL_ARGUMENTS_NOT_JSON
from language_models.governed.tool_messages import TOOL_RESULT_MAX_CHARS
from tests.support.llm_script_support import (  # noqa: F401  (a fixture)
    UNRECORDED_USE,
    llm_script,
    model_config,
    unrecorded_model_calls,
)
from workflows.agent import (
    AGENT_STOPPED,
    PURPOSE,
    AgentResult,
    AgentStep,
    agent_run,
    agent_tool,
    agent_tool_names,
)
from workflows.catalogue import CommandInfo, ParameterInfo
from workflows.outputs import CommandResponse, TraceEvent
from workflows.syntax import command_parse

__all__ = ["llm_script"]

LIST_PRODUCTS = CommandInfo(
    qualified_name="catalogue/ListProducts",
    description="Lists the products of a category.",
    parameters=(
        ParameterInfo(name="category", type="string", required=True, description="A category name."),
        ParameterInfo(name="limit", type="integer", required=False, default=10),
    ),
    examples=("catalogue/ListProducts <category>Books</category>",),
)
PRODUCT_PRICE = CommandInfo(
    qualified_name="catalogue/ProductPrice",
    description="The price of one product.",
    parameters=(
        ParameterInfo(name="product_id", type="integer", required=True),
        ParameterInfo(name="on", type="date", required=False),
        ParameterInfo(name="net", type="boolean", required=False),
        ParameterInfo(name="discount", type="number", required=False),
    ),
)
COMMANDS = [LIST_PRODUCTS, PRODUCT_PRICE]

pytestmark = pytest.mark.usefixtures("unrecorded_model_calls")


class Workflow:
    """Runs command texts the way the real one would answer, recording them."""

    def __init__(self, fail: Exception | None = None, answer: str | None = None) -> None:
        self.texts: list[str] = []
        self.fail = fail
        self.answer = answer
        self.traces_seen_at_run: list[int] = []

    async def run(self, text: str) -> AgentStep:
        self.texts.append(text)
        if self.fail is not None:
            raise self.fail
        parsed = command_parse(text=text)
        answer = (
            self.answer or f"ran {parsed.qualified_name} with {json.dumps(parsed.arguments, sort_keys=True)}"
        )
        return AgentStep(
            qualified_name=parsed.qualified_name,
            parameters=dict(parsed.arguments),
            response=CommandResponse(response=answer),
            success=True,
            response_text=answer,
        )


async def _run(
    workflow: Workflow, *, max_steps: int = 8, live: list[TraceEvent] | None = None
) -> AgentResult:
    seen = live if live is not None else []

    async def on_trace(event: TraceEvent) -> None:
        seen.append(event)

    return await agent_run(
        use=UNRECORDED_USE,
        config=model_config(),
        user_query="What does the cheapest book cost?",
        workflow_name="Sales analyst",
        context="catalogue",
        commands=COMMANDS,
        history=[
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi, what do you need?"},
        ],
        run_command=workflow.run,
        on_trace=on_trace,
        max_steps=max_steps,
    )


def _calls(*calls: tuple[str, Any]) -> dict[str, Any]:
    return {"toolCalls": [{"name": name, "arguments": arguments} for name, arguments in calls]}


async def test_two_tool_calls_then_a_final_answer(llm_script):
    llm_script(
        {
            PURPOSE: [
                _calls(("catalogue__ListProducts", {"category": "Books", "limit": 3})),
                _calls(("catalogue__ProductPrice", {"product_id": 7, "net": True, "on": "2026-01-31"})),
                "The cheapest book costs 4.50.",
            ]
        }
    )
    workflow = Workflow()
    live: list[TraceEvent] = []

    result = await _run(workflow, live=live)

    assert result.success is True
    assert result.final_text == "The cheapest book costs 4.50."
    assert workflow.texts == [
        "catalogue/ListProducts <category>Books</category> <limit>3</limit>",
        "catalogue/ProductPrice <product_id>7</product_id> <net>true</net> <on>2026-01-31</on>",
    ]
    assert [step.qualified_name for step in result.steps] == [
        "catalogue/ListProducts",
        "catalogue/ProductPrice",
    ]
    assert [(t.direction, t.command_name, t.success) for t in result.traces] == [
        ("agent_to_workflow", "catalogue/ListProducts", True),
        ("workflow_to_agent", "catalogue/ListProducts", True),
        ("agent_to_workflow", "catalogue/ProductPrice", True),
        ("workflow_to_agent", "catalogue/ProductPrice", True),
    ]
    request, answer = result.traces[0], result.traces[1]
    assert request.raw_command == workflow.texts[0]
    assert request.parameters == {"category": "Books", "limit": 3}
    assert request.response_text == ""
    assert answer.response_text.startswith("ran catalogue/ListProducts")
    assert all(t.timestamp > 1_700_000_000_000 for t in result.traces)
    assert [t.timestamp for t in result.traces] == sorted(t.timestamp for t in result.traces)
    assert live == result.traces


async def test_on_trace_is_called_while_the_turn_runs(llm_script):
    llm_script({PURPOSE: [_calls(("catalogue__ListProducts", {"category": "Books"})), "Done."]})
    live: list[TraceEvent] = []
    workflow = Workflow()
    original = workflow.run

    async def run(text: str) -> AgentStep:
        # The request's trace was already delivered when the command runs.
        workflow.traces_seen_at_run.append(len(live))
        return await original(text)

    workflow.run = run  # type: ignore[method-assign]

    await _run(workflow, live=live)

    assert workflow.traces_seen_at_run == [1]
    assert len(live) == 2


async def test_the_model_sees_the_tool_results_history_and_system_prompt(llm_script, monkeypatch):
    from language_models import governed

    sent: list[list[dict[str, Any]]] = []
    real = governed.model_complete_tools

    async def spy(**kwargs: Any):
        sent.append(json.loads(json.dumps(kwargs["messages"])))
        return await real(**kwargs)

    monkeypatch.setattr("workflows.agent.model_complete_tools", spy)
    llm_script({PURPOSE: [_calls(("catalogue__ListProducts", {"category": "Books"})), "Done."]})

    await _run(Workflow(answer="x" * (TOOL_RESULT_MAX_CHARS * 3)))

    system, *rest = sent[1]
    assert system["role"] == "system"
    assert "Sales analyst" in system["content"]
    assert "catalogue" in system["content"]
    assert "guess" in system["content"]
    assert [m["role"] for m in rest] == ["user", "assistant", "user", "assistant", "tool"]
    assert rest[0]["content"] == "Hello"
    assert rest[2]["content"] == "What does the cheapest book cost?"
    assert rest[3]["tool_calls"][0]["function"]["name"] == "catalogue__ListProducts"
    assert rest[4]["tool_call_id"] == rest[3]["tool_calls"][0]["id"]
    assert len(rest[4]["content"]) < TOOL_RESULT_MAX_CHARS + 100


async def test_max_steps_bounds_the_turn(llm_script):
    # The last item answers every later call: a model that never stops calling tools.
    llm_script({PURPOSE: _calls(("catalogue__ListProducts", {"category": "Books"}))})
    workflow = Workflow()

    result = await _run(workflow, max_steps=3)

    assert result.success is False
    assert result.final_text == AGENT_STOPPED.format(steps=3)
    assert len(workflow.texts) == 3
    assert len(result.traces) == 6


async def test_several_calls_in_one_answer_count_each_against_max_steps(llm_script):
    call = ("catalogue__ListProducts", {"category": "Books"})
    llm_script({PURPOSE: [_calls(call, call, call), "Done."]})
    workflow = Workflow()

    result = await _run(workflow, max_steps=2)

    assert len(workflow.texts) == 2
    assert result.success is False


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(("no__Such", {}), "There is no tool named 'no__Such'", id="unknown-tool"),
        pytest.param(("catalogue__ListProducts", "{oops"), TOOL_ARGUMENTS_NOT_JSON, id="not-json"),
        pytest.param(
            ("catalogue__ListProducts", {"colour": "red"}), "has no parameter colour", id="unknown-param"
        ),
        pytest.param(
            ("catalogue__ListProducts", {"category": "a</category><limit>1"}),
            "contains </category>",
            id="value-the-syntax-cannot-carry",
        ),
    ],
)
async def test_a_bad_call_from_the_model_is_told_to_it_and_the_loop_goes_on(
    llm_script, monkeypatch, call, expected
):
    from language_models import governed

    sent: list[list[dict[str, Any]]] = []
    real = governed.model_complete_tools

    async def spy(**kwargs: Any):
        sent.append(list(kwargs["messages"]))
        return await real(**kwargs)

    monkeypatch.setattr("workflows.agent.model_complete_tools", spy)
    llm_script({PURPOSE: [_calls(call), "Sorry, I could not do it."]})
    workflow = Workflow()

    result = await _run(workflow)

    assert workflow.texts == []
    assert result.traces == []
    assert result.final_text == "Sorry, I could not do it."
    tool_message = sent[1][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith("Error: ")
    assert expected in tool_message["content"]


@pytest.mark.parametrize(
    "refusal",
    [
        pytest.param(
            InvalidInput("The parameter category is missing.", data={"expected": "x"}), id="invalid"
        ),
        pytest.param(InsufficientScope(required=["workflows:run"], missing=["workflows:run"]), id="scope"),
    ],
)
async def test_a_command_refused_by_the_workflow_is_fed_back_with_a_failed_trace(llm_script, refusal):
    llm_script({PURPOSE: [_calls(("catalogue__ListProducts", {"category": "Books"})), "It was refused."]})

    result = await _run(Workflow(fail=refusal))

    assert result.final_text == "It was refused."
    assert result.success is True
    assert [(t.direction, t.success) for t in result.traces] == [
        ("agent_to_workflow", True),
        ("workflow_to_agent", False),
    ]
    assert refusal.message in result.traces[1].response_text
    assert result.steps[0].success is False


async def test_other_errors_from_a_command_end_the_turn(llm_script):
    llm_script({PURPOSE: [_calls(("catalogue__ListProducts", {"category": "Books"})), "never"]})

    with pytest.raises(NotFound):
        await _run(Workflow(fail=NotFound("gone")))


async def test_a_model_failure_ends_the_turn(llm_script):
    llm_script({PURPOSE: {"error": "ServiceUnavailableError"}})

    with pytest.raises(Unavailable):
        await _run(Workflow())


async def test_control_characters_in_the_final_answer_are_removed(llm_script):
    llm_script({PURPOSE: "Done\x00 \ud800here\x07."})

    result = await _run(Workflow())

    assert result.final_text == "Done here."


def test_each_command_gets_a_valid_unique_tool_name():
    long_context, long_name = "c" * 63, "N" * 63
    commands = [
        CommandInfo(qualified_name="x__y/Z", description=""),
        CommandInfo(qualified_name="x/y__Z", description=""),
        CommandInfo(qualified_name=f"{long_context}/{long_name}", description=""),
        CommandInfo(qualified_name=f"{long_context}/{long_name[:-1]}M", description=""),
        CommandInfo(qualified_name="x/y__Z", description="a duplicate"),
    ]

    names = agent_tool_names(commands)

    assert len(names) == 4
    assert "x__y__Z" in names
    assert all(len(name) <= 64 for name in names)
    assert all(name.replace("_", "").replace("-", "").isalnum() for name in names)
    assert sorted(c.qualified_name for c in names.values()) == sorted(c.qualified_name for c in commands[:4])


def test_a_tool_definition_has_typed_parameters_and_the_required_list():
    tool = agent_tool("catalogue__ProductPrice", PRODUCT_PRICE)

    parameters = tool["function"]["parameters"]
    assert parameters["properties"] == {
        "product_id": {"type": "integer"},
        "on": {"type": "string", "format": "date"},
        "net": {"type": "boolean"},
        "discount": {"type": "number"},
    }
    assert parameters["required"] == ["product_id"]
    list_tool = agent_tool("catalogue__ListProducts", LIST_PRODUCTS)["function"]
    assert list_tool["parameters"]["properties"]["limit"] == {"type": "integer", "default": 10}
    assert list_tool["description"].startswith("catalogue/ListProducts: Lists")
    assert "Examples:" in list_tool["description"]


async def test_a_context_without_commands_gets_a_plain_answer(llm_script):
    llm_script({PURPOSE: "There is nothing I can run here."})

    async def on_trace(event: TraceEvent) -> None:
        raise AssertionError("no trace expected")

    result = await agent_run(
        use=UNRECORDED_USE,
        config=model_config(),
        user_query="Anything?",
        workflow_name="Empty",
        context="nothing",
        commands=[],
        history=[],
        run_command=Workflow().run,
        on_trace=on_trace,
    )

    assert result == AgentResult(
        final_text="There is nothing I can run here.", steps=[], traces=[], success=True
    )

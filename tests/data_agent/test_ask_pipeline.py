"""The ask_question pipeline phase by phase, in process, on a small SQLite source. Every model call
goes through litellm with its own ``mock_response`` (the scripted file of ``language_models``)."""

from __future__ import annotations

import json
import sqlite3
from datetime import date
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from data_agent.ask_pipeline import PHASES, QuestionContext, QuestionRun
from data_agent.ask_schemas import ClarifyingQuestion
from data_agent.query_slots import QueryCaller
from data_agent.selectors import Catalog, CatalogDataset, CatalogField, CatalogJoin
from language_models.selectors import ModelConfig
from tests.support.llm_script_support import (  # noqa: F401  (a fixture)
    UNRECORDED_USE,
    unrecorded_model_calls,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("unrecorded_model_calls")]

REGION_TOTALS = [["North", 3, 60.0], ["South", 1, 5.0]]
SQL = (
    "SELECT r.name AS region, count(o.id) AS orders, sum(o.amount) AS revenue "
    "FROM orders o JOIN regions r ON r.id = o.region_id GROUP BY r.name ORDER BY r.name"
)


def _field(name: str, type_: str = "integer") -> CatalogField:
    return CatalogField(name=name, type=type_, description="", source_column=name)


CATALOG = Catalog(
    ontology_id="00000000-0000-0000-0000-000000000001",
    name="Sales",
    description="Orders by region.",
    dialect="sqlite",
    datasets=(
        CatalogDataset(
            name="orders",
            description="One row per order.",
            source_table="orders",
            fields=(_field("id"), _field("region_id"), _field("amount", "numeric"), _field("day", "date")),
        ),
        CatalogDataset(
            name="regions",
            description="Sales regions.",
            source_table="regions",
            fields=(_field("id"), _field("name", "text")),
        ),
    ),
    joins=(
        CatalogJoin(from_dataset="orders", from_column="region_id", to_dataset="regions", to_column="id"),
    ),
)


@pytest.fixture
def source(tmp_path) -> str:
    path = tmp_path / "sales.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE regions (id INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, region_id INTEGER, amount NUMERIC, day TEXT);"
        "INSERT INTO regions VALUES (1, 'North'), (2, 'South');"
        "INSERT INTO orders VALUES (1, 1, 10, '2025-01-02'), (2, 1, 20, '2025-02-03'),"
        " (3, 1, 30, '2025-03-04'), (4, 2, 5, '2025-03-05');"
    )
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


@pytest.fixture
def script(tmp_path, settings):
    """Write the models' scripted answers for one run; each value is one reply or a list of them."""
    path = tmp_path / "llm-script.json"
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(path)}

    def write(**responses: object) -> Path:
        encoded = {
            purpose: [json.dumps(r) for r in reply] if isinstance(reply, list) else json.dumps(reply)
            for purpose, reply in responses.items()
        }
        path.write_text(json.dumps({"responses": encoded}))
        return path

    return write


class FakeAsker:
    def __init__(self, answers: list[tuple[str, str]] | None = None) -> None:
        self.steps: list[tuple[int, int, str]] = []
        self.asked: list[list[str]] = []
        self.answers = answers

    async def progress(self, step: int, total: int, message: str) -> None:
        self.steps.append((step, total, message))

    async def clarify(self, questions):
        self.asked.append([q.question for q in questions])
        return self.answers


def _run(source: str, asker: FakeAsker) -> QuestionRun:
    context = QuestionContext(
        catalog=CATALOG,
        source_url=source,
        source_id=1,
        caller=QueryCaller(tenant_id=1, user_id=1),
        model=ModelConfig(
            model="openai/gpt-4o-mini",
            api_key=None,
            api_base=None,
            temperature=0,
            max_output_tokens=500,
            timeout_seconds=30,
        ),
        preferences={"default time period": "2025"},
        today=date(2026, 1, 15),
    )
    return QuestionRun(use=UNRECORDED_USE, context=context, asker=asker)


PLAN = {
    "action": "answer",
    "restatedQuestion": "Revenue by region in 2025",
    "assumptions": ["2025 means the calendar year"],
}
ROUTE = {"datasets": ["orders", "regions"], "joins": [{"left": "orders.region_id", "right": "regions.id"}]}
BUILT = {"sql": SQL, "explanation": "Sum per region."}
CHECKED = {"ok": True, "caveats": ["Only four orders exist."]}
EXPLAINED = {
    "narrative": "North leads with **60.0** in revenue.",
    "chart": {"type": "bar", "title": "Revenue by region", "x": "region", "y": ["revenue"]},
}


async def test_a_question_runs_every_phase_and_answers_from_the_real_result(source, script):
    script(planner=PLAN, navigator=ROUTE, sql_builder=BUILT, verifier=CHECKED, explainer=EXPLAINED)
    asker = FakeAsker()
    outcome = await _run(source, asker).answer("What is revenue by region?")

    assert outcome.status == "answered"
    assert [s[0] for s in asker.steps] == [1, 2, 3, 4, 5, 6]
    assert [s[2] for s in asker.steps] == [f"{p}…" for p in PHASES]
    assert outcome.result is not None
    assert outcome.result.rows == REGION_TOTALS
    assert outcome.charts == [
        {
            "type": "bar",
            "title": "Revenue by region",
            "xLabel": "region",
            "categories": ["North", "South"],
            "series": [{"name": "revenue", "data": [60.0, 5.0]}],
        }
    ]
    assert outcome.lineage is not None
    assert {d["name"] for d in outcome.lineage["datasets"]} == {"orders", "regions"}
    assert outcome.caveats == ["Only four orders exist."]
    assert outcome.assumptions == ["2025 means the calendar year"]


async def test_a_clarification_stops_before_any_sql_when_the_person_cannot_be_asked(source, script):
    # No navigator, builder or later phase is scripted: calling one would fail the run.
    questions = [{"question": f"Question {i}?", "suggestions": ["a", "b"]} for i in range(5)]
    script(planner={"action": "clarify", "clarifications": questions})
    asker = FakeAsker(answers=None)
    outcome = await _run(source, asker).answer("How are we doing?")

    assert outcome.status == "clarification_needed"
    assert [q.question for q in outcome.clarifications] == ["Question 0?", "Question 1?", "Question 2?"]
    assert outcome.sql is None
    assert outcome.result is None
    assert asker.asked == [["Question 0?", "Question 1?", "Question 2?"]]


async def test_answers_to_a_clarification_go_back_to_the_planner(source, script):
    clarify = {
        "action": "clarify",
        "clarifications": [{"question": "Which metric?", "suggestions": ["revenue"]}],
    }
    script(planner=[clarify, PLAN], navigator=ROUTE, sql_builder=BUILT, verifier=CHECKED, explainer=EXPLAINED)
    asker = FakeAsker(answers=[("Which metric?", "revenue")])
    outcome = await _run(source, asker).answer("How are regions doing?")

    assert outcome.status == "answered"
    assert outcome.result is not None
    assert outcome.result.rows == REGION_TOTALS


async def test_a_planner_that_finds_no_data_lists_what_is_missing_and_available(source, script):
    script(planner={"action": "cannot_answer", "missingData": ["employee headcount"]})
    outcome = await _run(source, FakeAsker()).answer("How many employees do we have?")
    assert outcome.status == "cannot_answer"
    assert outcome.missing == ["employee headcount"]
    assert outcome.available == ["orders", "regions"]


async def test_a_dataset_the_ontology_lacks_makes_it_cannot_answer(source, script):
    script(planner=PLAN, navigator={"datasets": ["orders", "invoices"]})
    outcome = await _run(source, FakeAsker()).answer("Revenue by invoice?")
    assert outcome.status == "cannot_answer"
    assert outcome.missing == ["invoices"]


async def test_a_refused_query_goes_back_to_the_builder_once(source, script):
    script(
        planner=PLAN,
        navigator=ROUTE,
        sql_builder=[{"sql": "DELETE FROM orders"}, BUILT],
        verifier=CHECKED,
        explainer=EXPLAINED,
    )
    outcome = await _run(source, FakeAsker()).answer("Revenue by region?")
    assert outcome.sql is not None
    assert outcome.sql.startswith("SELECT")
    assert outcome.result is not None
    assert outcome.result.rows == REGION_TOTALS


async def test_a_query_the_database_refuses_twice_is_a_tool_error(source, script):
    script(planner=PLAN, navigator=ROUTE, sql_builder={"sql": "SELECT nope FROM orders"})
    with pytest.raises(ToolError, match="could not write a query"):
        await _run(source, FakeAsker()).answer("Revenue by region?")


async def test_an_unusable_answer_is_sent_back_once(source, script):
    script(planner=["Sure! Here is my plan.", PLAN], navigator="not json", sql_builder=BUILT)
    with pytest.raises(ToolError, match="Choosing datasets"):
        await _run(source, FakeAsker()).answer("Revenue by region?")


async def test_automatic_findings_lead_the_caveats_and_a_bad_chart_is_dropped(source, script):
    fanned = (
        "SELECT r.name AS region, sum(r.id) AS ids, max(o.day) AS last_day FROM regions r "
        "JOIN orders o ON o.region_id = r.id WHERE o.day > '2025-03-01' GROUP BY r.name"
    )
    script(
        planner=PLAN,
        navigator=ROUTE,
        sql_builder={"sql": fanned},
        verifier={"ok": False, "caveats": []},
        explainer={"narrative": "Done.", "chart": {"type": "pie", "x": "region", "y": "last_day"}},
    )
    outcome = await _run(source, FakeAsker()).answer("Last order by region?")
    assert outcome.status == "answered"
    assert len(outcome.caveats) == 1
    assert "each may be counted more than once" in outcome.caveats[0]
    assert outcome.charts == []


def test_clarifying_questions_are_capped_at_three():
    from data_agent.ask_schemas import PlannerReply

    plan = PlannerReply.model_validate(
        {"action": "clarify", "clarifications": [{"question": f"q{i}"} for i in range(4)]}
    )
    assert [q.question for q in plan.clarifications] == ["q0", "q1", "q2"]
    assert isinstance(plan.clarifications[0], ClarifyingQuestion)


def test_the_planner_is_given_the_persons_preferences_and_no_one_elses():
    from data_agent.ask_pipeline import question_context_load
    from data_agent.ask_prompts import planner_messages
    from tests.support.factories import (
        AgentPreferenceFactory,
        LanguageModelFactory,
        MembershipFactory,
        OntologyFactory,
    )

    ontology = OntologyFactory.create()
    LanguageModelFactory.create(tenant=ontology.tenant)
    member = MembershipFactory.create(tenant=ontology.tenant)
    AgentPreferenceFactory.create(
        user=member.user,
        tenant=ontology.tenant,
        default_time_period="this quarter",
        notes="Fiscal year: April.",
    )
    AgentPreferenceFactory.create(tenant=ontology.tenant, default_time_period="last decade")

    context = question_context_load(
        tenant_id=ontology.tenant_id, user_id=member.user_id, ontology_id=str(ontology.pk)
    )
    assert context.preferences == {"default time period": "this quarter", "notes": "Fiscal year: April."}
    (_, user_message) = planner_messages(
        question="Sales?", catalog=context.catalog, today=date(2026, 1, 1), preferences=context.preferences
    )
    assert "this quarter" in user_message["content"]
    assert "last decade" not in user_message["content"]


def test_a_tenant_without_a_model_is_told_so_before_anything_runs():
    from data_agent.ask_pipeline import question_context_load
    from language_models.selectors import NoModelConfigured
    from tests.support.factories import OntologyFactory

    ontology = OntologyFactory.create()
    with pytest.raises(NoModelConfigured, match="No language model is configured"):
        question_context_load(tenant_id=ontology.tenant_id, user_id=1, ontology_id=str(ontology.pk))


async def test_an_unreachable_data_source_is_unavailable(tmp_path, script):
    from core.errors import Unavailable

    script(planner=PLAN, navigator=ROUTE, sql_builder=BUILT)
    with pytest.raises(Unavailable) as refusal:
        await _run(f"sqlite:///{tmp_path}/gone.sqlite3", FakeAsker()).answer("Revenue by region?")
    assert refusal.value.jsonrpc_code == -32005

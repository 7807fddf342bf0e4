"""``ask_question`` through the official SDK client against Daphne, on acme's sample database on
PostgreSQL. Each phase's model answer is scripted with litellm's own ``mock_response`` (the server
reads the script file named by ``LLM_MOCK_RESPONSES_FILE``); the SQL really runs. The servers are the
session's gateway servers, whose script each test writes before its calls; only the server whose
time limit and rate limit are tested is this module's own."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult, TextContent

from core.models import AuditAction, AuditEvent
from data_agent.ask_pipeline import PHASES
from data_agent.executor import json_safe
from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from data_agent.selectors import data_source_url
from language_models.models import LlmUsage
from tests.e2e.conftest import _serve
from tests.e2e.harness import E2E_RATE_LIMIT_PREFIX, DaphneServer, Person, RoundRobin, sdk_client
from tests.e2e.stamping import StampingTransport, audit_events
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db

REVENUE_BY_REGION = (
    "SELECT r.name AS region, sum(l.quantity * l.unit_price) AS revenue"
    " FROM orders o JOIN customers c ON c.id = o.customer_id JOIN regions r ON r.id = c.region_id"
    " JOIN order_lines l ON l.order_id = o.id"
    " WHERE o.order_date >= '2025-07-01' AND o.order_date < '2025-10-01'"
    " GROUP BY r.name ORDER BY revenue DESC"
)
PLAN = {
    "action": "answer",
    "restatedQuestion": "Total sales (quantity times unit price) by region from 2025-07-01 to 2025-09-30",
    "assumptions": ["Last quarter is Q3 2025."],
}
ROUTE = {
    "datasets": ["orders", "customers", "regions", "order_lines"],
    "joins": [
        {"left": "orders.customer_id", "right": "customers.id"},
        {"left": "customers.region_id", "right": "regions.id"},
        {"left": "order_lines.order_id", "right": "orders.id"},
    ],
}
CAVEAT = "Cancelled orders are included in the totals."
CHART = {"type": "bar", "title": "Sales by region, Q3 2025", "x": "region", "y": ["revenue"]}


def _script_writer(path: Path):
    def write(*, delays: dict[str, float] | None = None, **responses: object) -> None:
        encoded = {
            purpose: [json.dumps(r) for r in reply] if isinstance(reply, list) else json.dumps(reply)
            for purpose, reply in responses.items()
        }
        path.write_text(json.dumps({"responses": encoded, "delaySeconds": delays or {}}))

    return write


@pytest.fixture
def script(script_path):
    return _script_writer(script_path)


@pytest.fixture
def acme_sales(demo) -> Ontology:
    return Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)


@pytest.fixture
def acme_model(committed) -> None:
    committed(
        LanguageModelFactory, tenant=_acme(), name="Scripted", model="openai/gpt-4o-mini", is_default=True
    )


def _acme():
    from accounts.models import Tenant

    return Tenant.objects.get(slug="acme")


def _direct(ontology: Ontology, sql: str) -> list[list]:
    with psycopg.connect(data_source_url(data_source=ontology.data_source)) as conn:
        return [[json_safe(v) for v in row] for row in conn.execute(sql).fetchall()]


async def _call_audit(transport: StampingTransport) -> AuditEvent:
    """The audit row of the one ``ask_question`` call the client sent through ``transport``."""
    [request_id] = transport.request_ids("tools/call")
    [event] = [e for e in await audit_events(request_id) if e.action != AuditAction.MODEL_CALLED]
    assert (event.action, event.target) == (AuditAction.TOOL_CALLED, "ask_question")
    return event


async def _model_call_audits(transport: StampingTransport) -> list[AuditEvent]:
    """The governed path's rows for the model calls of that one call (same request id)."""
    [request_id] = transport.request_ids("tools/call")
    return [e for e in await audit_events(request_id) if e.action == AuditAction.MODEL_CALLED]


def _texts(result) -> list[str]:
    """The readable blocks of an answer; its last block, checked here, is the structured content
    as JSON, for a client that shows its model only text."""
    assert all(isinstance(block, TextContent) for block in result.content)
    *readable, last = [block.text for block in result.content]
    assert json.loads(last) == result.structured_content
    return readable


async def test_alice_gets_sales_by_region_from_the_real_data(gateway_server, acme_sales, acme_model, script):
    expected = _direct(acme_sales, REVENUE_BY_REGION)
    assert len(expected) >= 3
    top_region = expected[0][0]
    script(
        planner=PLAN,
        navigator=ROUTE,
        sql_builder={"sql": REVENUE_BY_REGION, "explanation": "Line totals per region."},
        verifier={"ok": True, "caveats": [CAVEAT]},
        explainer={"narrative": f"**{top_region}** sold the most last quarter.", "chart": CHART},
    )
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    transport = StampingTransport()
    async with sdk_client(gateway_server, Person("alice"), transport=transport) as (client, _):
        result = await client.call_tool(
            "ask_question",
            {"ontologyId": str(acme_sales.id), "question": "What were total sales by region last quarter?"},
            progress_callback=on_progress,
        )

    assert not result.is_error, result
    narrative, charts, lineage, caveats = _texts(result)
    # The narrative carries the executed query's real figures, in a table the code wrote.
    assert f"**{top_region}** sold the most" in narrative
    for region, revenue in expected:
        assert f"| {region} | {revenue} |" in narrative
    chart_specs = json.loads(charts)
    assert chart_specs["_type"] == "chart_specs"
    (chart,) = chart_specs["charts"]
    assert chart["type"] == "bar"
    assert chart["categories"] == [region for region, _ in expected]
    assert chart["series"] == [{"name": "revenue", "data": [float(revenue) for _, revenue in expected]}]
    data_lineage = json.loads(lineage)
    assert data_lineage["_type"] == "data_lineage"
    assert {d["name"] for d in data_lineage["datasets"]} == {"orders", "customers", "regions", "order_lines"}
    assert data_lineage["timeWindow"] == {"column": "o.order_date", "from": "2025-07-01", "to": "2025-10-01"}
    assert data_lineage["grain"] == {"level": "group", "by": ["r.name"]}
    assert caveats == f"⚠️ {CAVEAT}"

    answer = result.structured_content
    assert answer is not None
    assert answer["status"] == "answered"
    assert answer["narrative"] == narrative
    assert answer["chartSpecs"] == chart_specs
    assert answer["lineage"] == data_lineage
    assert answer["caveats"] == [CAVEAT]
    assert answer["rows"] == expected
    assert answer["rowCount"] == len(expected)
    assert answer["sql"].startswith("SELECT r.name AS region")
    assert [message for _, _, message in seen] == [f"{phase}…" for phase in PHASES]
    assert {total for _, total, _ in seen} == {len(PHASES)}
    # The audit trail says which SQL ran on acme's data and what the model calls cost.
    noted = (await _call_audit(transport)).detail["result"]
    assert noted["status"] == "answered"
    assert noted["sql"] == answer["sql"]
    assert noted["rowCount"] == len(expected)
    assert noted["modelCalls"] == 5
    assert noted["promptTokens"] > 0
    assert noted["completionTokens"] > 0
    # Each of the five model calls took the governed path: one row each, with its usage record.
    model_calls = await _model_call_audits(transport)
    assert len(model_calls) == 5
    assert {event.detail["feature"] for event in model_calls} == {"ask_question"}
    assert sum(event.detail["promptTokens"] for event in model_calls) == noted["promptTokens"]
    usage = LlmUsage.objects.filter(id__in=[uuid.UUID(event.detail["usage"]) for event in model_calls])
    assert await usage.filter(feature="ask_question", outcome="ok").acount() == 5


async def test_an_ambiguous_question_returns_a_clarification_request_without_running_sql(
    gateway_server, acme_sales, acme_model, script
):
    questions = [
        {"question": "Do you mean revenue or number of orders?", "suggestions": ["revenue", "orders"]},
        {"question": "Which period?", "suggestions": ["last quarter", "this year"]},
    ]
    # Nothing after the planner is scripted: a run that went on would fail.
    script(planner={"action": "clarify", "clarifications": questions})
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        result = await client.call_tool(
            "ask_question", {"ontologyId": str(acme_sales.id), "question": "How are sales?"}
        )
    assert not result.is_error, result
    (block,) = _texts(result)
    assert json.loads(block) == {"_type": "clarification_request", "questions": questions}
    answer = result.structured_content
    assert answer is not None
    assert answer["status"] == "clarification_needed"
    assert answer["clarification"] == json.loads(block)
    assert answer["sql"] is None


def _script_a_clarified_answer(script, asked: list[ElicitRequestParams]):
    """Script a planner that asks "Which period?" before planning, and the rest of an answer; the
    returned elicitation callback records each form and answers it."""
    clarify = {
        "action": "clarify",
        "clarifications": [{"question": "Which period?", "suggestions": ["Q3 2025"]}],
    }
    script(
        planner=[clarify, PLAN],
        navigator=ROUTE,
        sql_builder={"sql": REVENUE_BY_REGION},
        verifier={"ok": True, "caveats": []},
        explainer={"narrative": "Here are the totals.", "chart": None},
    )

    async def answer_form(context, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"answer1": "Q3 2025"})

    return answer_form


async def test_a_client_with_elicitation_is_asked_and_the_answer_reaches_the_planner(
    gateway_server, acme_sales, acme_model, script
):
    asked: list[ElicitRequestParams] = []
    answer_form = _script_a_clarified_answer(script, asked)

    async with sdk_client(gateway_server, Person("alice"), elicitation_callback=answer_form) as (client, _):
        result = await client.call_tool(
            "ask_question", {"ontologyId": str(acme_sales.id), "question": "Sales by region?"}
        )
    assert not result.is_error, result
    assert len(asked) == 1
    assert asked[0].requested_schema["properties"]["answer1"]["title"] == "Which period?"  # type: ignore[union-attr]
    answer = result.structured_content
    assert answer is not None
    assert answer["status"] == "answered"
    assert answer["chartSpecs"] is None
    assert answer["rows"] == _direct(acme_sales, REVENUE_BY_REGION)
    assert len(_texts(result)) == 2  # narrative and lineage: no chart, no caveats


async def test_a_question_the_data_cannot_answer_lists_missing_and_available_datasets(
    gateway_server, acme_sales, acme_model, script
):
    script(planner={"action": "cannot_answer", "missingData": ["employee salaries"]})
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        result = await client.call_tool(
            "ask_question", {"ontologyId": str(acme_sales.id), "question": "What is our payroll?"}
        )
    (text,) = _texts(result)
    assert "employee salaries" in text
    assert "customers, order_lines, orders, products, regions" in text
    answer = result.structured_content
    assert answer is not None
    assert (answer["status"], answer["missingDatasets"]) == ("cannot_answer", ["employee salaries"])
    assert answer["availableDatasets"] == ["customers", "order_lines", "orders", "products", "regions"]


async def test_a_viewer_is_refused(gateway_server, acme_sales, acme_model):
    async with sdk_client(gateway_server, Person("bob")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("ask_question", {"ontologyId": str(acme_sales.id), "question": "Sales?"})
    assert refusal.value.error.code == -32001
    assert "data_agent:write" in refusal.value.error.message


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"ontologyId": "not-a-uuid", "question": "Sales?"}, "ontologyId"),
        ({"question": "x" * 2001}, "question"),
        ({"question": ""}, "question"),
        ({"question": "   "}, "question"),
    ],
    ids=["bad-uuid", "too-long", "empty", "blank"],
)
async def test_bad_input_is_refused_before_anything_runs(gateway_server, acme_sales, arguments, field):
    # No model and no script: a run that started would fail otherwise than with -32602.
    arguments = {"ontologyId": str(acme_sales.id), **arguments}
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("ask_question", arguments)
    assert refusal.value.error.code == -32602
    assert field in json.dumps(refusal.value.error.data)


async def test_without_a_model_it_says_so_and_run_query_still_works(gateway_server, acme_sales):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("ask_question", {"ontologyId": str(acme_sales.id), "question": "Sales?"})
        rows = await client.call_tool(
            "run_query", {"ontologyId": str(acme_sales.id), "sql": "SELECT count(*) AS n FROM regions"}
        )
    assert refusal.value.error.code == -32003
    assert "No language model is configured" in refusal.value.error.message
    assert not rows.is_error


async def test_preferences_are_stored_per_person(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        empty = await client.call_tool("get_data_preferences", {})
        saved = await client.call_tool("set_data_preferences", {"defaultTimePeriod": "last 12 months"})
        noted = await client.call_tool("set_data_preferences", {"notes": "Fiscal year starts in April."})
        read = await client.call_tool("get_data_preferences", {})
        await client.call_tool("set_data_preferences", {"defaultTimePeriod": "", "notes": ""})
    assert empty.structured_content == {"defaultTimePeriod": "", "notes": ""}
    assert saved.structured_content == {"defaultTimePeriod": "last 12 months", "notes": ""}
    assert noted.structured_content == read.structured_content
    assert read.structured_content == {
        "defaultTimePeriod": "last 12 months",
        "notes": "Fiscal year starts in April.",
    }


@pytest.fixture(scope="module")
def slow_script_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("llm-slow") / "script.json"


@pytest.fixture(scope="module")
def slow_server(demo, database_url, tmp_path_factory, slow_script_path) -> Iterator[DaphneServer]:
    """Questions time out after two seconds here, and the default limit of 5 a minute applies."""
    yield from _serve(
        tmp_path_factory,
        database_url,
        "ask-slow",
        LLM_MOCK_RESPONSES_FILE=str(slow_script_path),
        DATA_AGENT_QUESTION_TIMEOUT_SECONDS="2",
        RATE_LIMIT_TOOL_EXPENSIVE="5/minute",
        RATE_LIMIT_KEY_PREFIX=f"{E2E_RATE_LIMIT_PREFIX}-ask-slow",
    )


async def test_a_question_that_runs_too_long_is_stopped(
    slow_server, slow_script_path, acme_sales, acme_model
):
    _script_writer(slow_script_path)(planner=PLAN, delays={"planner": 30})
    transport = StampingTransport()
    async with sdk_client(slow_server, Person("alice"), transport=transport) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("ask_question", {"ontologyId": str(acme_sales.id), "question": "Sales?"})
    assert refusal.value.error.code == -32004
    assert "longer than 2 s" in refusal.value.error.message
    assert refusal.value.error.data == {"timeoutSeconds": 2, "phase": "Planning"}
    event = await _call_audit(transport)
    assert event.outcome == "error"
    assert event.detail["code"] == -32004
    assert (event.detail["result"]["phase"], event.detail["result"]["sql"]) == ("Planning", None)


async def test_five_questions_a_minute_by_default(slow_server, acme_sales, tenant_toolset):
    tenant_toolset("globex", "data_agent", enabled=True)
    async with sdk_client(slow_server, Person("carol")) as (client, _):
        # Another tenant's ontology is not found (each call fails fast, and still counts).
        calls = [
            client.call_tool("ask_question", {"ontologyId": str(acme_sales.id), "question": f"Sales {i}?"})
            for i in range(6)
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
    codes = sorted(o.error.code for o in outcomes if isinstance(o, MCPError))
    assert codes == [-32029] + [-32002] * 5, outcomes


async def test_on_2026_07_28_the_question_comes_back_between_two_calls_on_any_worker(
    gateway_server, second_gateway_server, acme_sales, acme_model, script
):
    # No back-channel on 2026-07-28: the form rides an input_required result, and the client's
    # second call (sent to the other replica here) carries the answer and the sealed state.
    asked: list[ElicitRequestParams] = []
    answer_form = _script_a_clarified_answer(script, asked)

    balancer = RoundRobin([gateway_server.port, second_gateway_server.port])
    async with sdk_client(
        gateway_server, Person("alice"), mode="auto", transport=balancer, elicitation_callback=answer_form
    ) as (client, _):
        result = await client.call_tool(
            "ask_question", {"ontologyId": str(acme_sales.id), "question": "Sales by region?"}
        )
    assert len(asked) == 1
    assert asked[0].requested_schema["properties"]["answer1"]["title"] == "Which period?"  # type: ignore[union-attr]
    answer = result.structured_content
    assert answer is not None
    assert answer["status"] == "answered"
    assert answer["rows"] == _direct(acme_sales, REVENUE_BY_REGION)


async def test_on_2026_07_28_a_declined_form_is_not_asked_again(
    gateway_server, acme_sales, acme_model, script
):
    clarify = {"action": "clarify", "clarifications": [{"question": "Which period?", "suggestions": []}]}
    script(planner=clarify)
    asked: list[ElicitRequestParams] = []

    async def decline(context, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="decline")

    async with sdk_client(gateway_server, Person("alice"), mode="auto", elicitation_callback=decline) as (
        client,
        _,
    ):
        result = await client.call_tool(
            "ask_question", {"ontologyId": str(acme_sales.id), "question": "Sales?"}
        )
    assert len(asked) == 1
    assert result.structured_content is not None
    assert result.structured_content["status"] == "clarification_needed"


async def test_on_2026_07_28_a_client_without_forms_gets_the_request_in_the_result(
    gateway_server, acme_sales, acme_model, script
):
    questions = [{"question": "Which period?", "suggestions": ["last quarter"]}]
    script(planner={"action": "clarify", "clarifications": questions})
    async with sdk_client(gateway_server, Person("alice"), mode="auto") as (client, _):
        result = await client.call_tool(
            "ask_question", {"ontologyId": str(acme_sales.id), "question": "Sales?"}
        )
    assert result.structured_content is not None
    assert result.structured_content["clarification"] == {
        "_type": "clarification_request",
        "questions": questions,
    }

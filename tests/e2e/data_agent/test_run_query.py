"""``run_query`` through the official SDK client against Daphne, on acme's demo sample database."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from mcp.shared.exceptions import MCPError

from core.models import AuditAction
from data_agent.executor import json_safe
from data_agent.models import Ontology
from data_agent.query_tool import ANSWER_ROWS_MAX_BYTES
from data_agent.sample import ONTOLOGY_NAME
from data_agent.selectors import data_source_url
from mcp_gateway.kernel.tool_results import TEXT_JSON_MAX_BYTES
from tests.e2e.harness import RESEARCH_TOOLS, Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.stamping import StampingTransport, audit_events

pytestmark = pytest.mark.django_db

REVENUE_BY_REGION = (
    "SELECT r.name AS region, count(DISTINCT o.id) AS orders, sum(l.quantity * l.unit_price) AS revenue"
    " FROM orders o JOIN customers c ON c.id = o.customer_id JOIN regions r ON r.id = c.region_id"
    " JOIN order_lines l ON l.order_id = o.id"
    " WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01'"
    " GROUP BY r.name ORDER BY r.name"
)


@pytest.fixture
def acme_sales(demo) -> Ontology:
    return Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)


def _direct(ontology: Ontology, sql: str) -> list[list]:
    with psycopg.connect(data_source_url(data_source=ontology.data_source)) as conn:
        return [[json_safe(v) for v in row] for row in conn.execute(sql).fetchall()]


async def test_alice_gets_revenue_by_region_with_its_lineage(server, committed, acme_sales):
    expected = _direct(acme_sales, REVENUE_BY_REGION)
    transport = StampingTransport()
    async with minted_sdk_client(committed, server, Person("alice"), transport=transport) as (client, _):
        result = await client.call_tool(
            "run_query", {"ontologyId": str(acme_sales.id), "sql": REVENUE_BY_REGION}
        )
    assert not result.is_error
    answer = result.structured_content
    assert answer is not None
    assert answer["columns"] == ["region", "orders", "revenue"]
    assert expected
    assert answer["rows"] == expected
    assert (answer["rowCount"], answer["truncated"]) == (len(expected), False)
    lineage = answer["lineage"]
    assert lineage["_type"] == "data_lineage"
    assert {d["sourceTable"] for d in lineage["datasets"]} == {
        "orders",
        "customers",
        "regions",
        "order_lines",
    }
    assert lineage["timeWindow"] == {"column": "o.order_date", "from": "2025-01-01", "to": "2026-01-01"}
    assert lineage["grain"] == {"level": "group", "by": ["r.name"]}
    summary, data = (block.text for block in result.content)  # type: ignore[union-attr]
    assert f"{len(expected)} rows" in summary
    # The rows reach a client that shows its model only text: the structured content, as JSON.
    assert json.loads(data) == answer
    assert json.loads(data)["rows"] == expected
    [event] = await audit_events(transport.request_ids("tools/call")[0])
    assert (event.action, event.target) == (AuditAction.TOOL_CALLED, "run_query")
    assert event.detail["result"] == {"sql": answer["sql"], "rowCount": len(expected), "truncated": False}


async def test_a_result_past_10000_rows_is_cut_and_says_so(server, committed, acme_sales):
    sql = "SELECT l.id, r.id FROM order_lines l CROSS JOIN regions r"
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        result = await client.call_tool("run_query", {"ontologyId": str(acme_sales.id), "sql": sql})
    answer = result.structured_content
    assert answer is not None
    assert (answer["rowCount"], len(answer["rows"]), answer["truncated"]) == (10_000, 10_000, True)
    assert "The first 10,000 rows are shown: the result had more" in result.content[0].text  # type: ignore[union-attr]
    assert json.loads(result.content[-1].text) == answer  # type: ignore[union-attr]


async def test_rows_past_the_text_bound_stay_whole_in_structured_content_and_the_text_says_so(
    server, committed, acme_sales
):
    sql = "SELECT l.*, r.* FROM order_lines l CROSS JOIN regions r"
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        result = await client.call_tool("run_query", {"ontologyId": str(acme_sales.id), "sql": sql})
    answer = result.structured_content
    assert answer is not None
    assert len(answer["rows"]) == 10_000
    summary, note, data = (block.text for block in result.content)  # type: ignore[union-attr]
    assert summary.startswith("The first 10,000 rows are shown")
    assert len(data.encode()) <= TEXT_JSON_MAX_BYTES
    shown = json.loads(data)
    kept = len(shown["rows"])
    assert 0 < kept < 10_000
    assert shown == {**answer, "rows": answer["rows"][:kept]}
    assert note.startswith(f"The JSON below holds the first {kept:,} of 10,000 rows")
    assert "structuredContent holds every row" in note


async def test_rows_past_what_one_message_carries_are_left_out_and_the_answer_says_so(
    server, committed, acme_sales
):
    # Each of 10,000 rows is about 116 bytes of JSON: more than the official SDK client takes in
    # one server-sent event (1 MiB), whichever way the server sends the answer.
    sql = "SELECT l.*, r.*, l.*, r.* FROM order_lines l CROSS JOIN regions r"
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        result = await client.call_tool("run_query", {"ontologyId": str(acme_sales.id), "sql": sql})
    answer = result.structured_content
    assert answer is not None
    shown = len(answer["rows"])
    assert 0 < shown < 10_000
    assert (answer["rowCount"], answer["truncated"]) == (shown, True)
    assert len(json.dumps(answer["rows"], separators=(",", ":"))) <= ANSWER_ROWS_MAX_BYTES
    summary = result.content[0].text  # type: ignore[union-attr]
    assert summary.startswith(f"The first {shown:,} rows are shown: the rows after them would make")
    assert f"{shown:,} rows (" in summary


async def test_every_structured_answer_repeats_its_structured_content_as_text(server, committed, acme_sales):
    calls: list[tuple[str, dict[str, Any]]] = [
        ("whoami", {}),
        ("set_display_name", {"display_name": "Alice A."}),
        ("get_data_preferences", {}),
        ("set_data_preferences", {}),
        ("run_query", {"ontologyId": str(acme_sales.id), "sql": "SELECT name FROM regions ORDER BY name"}),
        ("initialize", {}),
        ("get_workflow_info", {}),
        ("get_commands", {}),
        ("execute_command", {"command": "catalogue/ListCategories"}),
        ("invoke_assistant", {"user_query": "orders/OrdersByStatus"}),
        ("post_feedback", {"binary_or_numeric_score": True}),
        ("list_conversations", {}),
        ("new_conversation", {}),
    ]
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        # ask_question's and invoke_agent's answers are checked in test_ask_question and
        # test_workflow_tools (they need a scripted model); activate_conversation's there too; the
        # research tools' in test_research_tools (they need a jobs worker).
        assert {name for name, t in listed.items() if t.output_schema} == {name for name, _ in calls} | {
            "ask_question",
            "invoke_agent",
            "activate_conversation",
            *RESEARCH_TOOLS,
        }
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, (name, result)
            assert result.structured_content is not None
            assert json.loads(result.content[-1].text) == result.structured_content, name  # type: ignore[union-attr]


async def test_a_write_is_refused_as_invalid_input(server, committed, acme_sales):
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool(
                "run_query", {"ontologyId": str(acme_sales.id), "sql": "DELETE FROM orders"}
            )
    assert refusal.value.error.code == -32602
    assert refusal.value.error.data["reason"] == "not_select"
    assert _direct(acme_sales, "SELECT count(*) FROM orders")[0][0] > 0


async def test_bob_the_viewer_is_refused(server, committed, acme_sales):
    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("run_query", {"ontologyId": str(acme_sales.id), "sql": "SELECT 1"})
    assert refusal.value.error.code == -32001
    assert "data_agent:write" in refusal.value.error.data["missing"]


async def test_carol_cannot_reach_acme_s_ontology(server, committed, acme_sales, tenant_toolset):
    tenant_toolset("globex", "data_agent", enabled=True)
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("run_query", {"ontologyId": str(acme_sales.id), "sql": "SELECT 1"})
    assert refusal.value.error.code == -32002

"""The data agent's pieces that need no model: reply parsing, charts from real rows, the verifier's
automatic findings and the answer's layout."""

from __future__ import annotations

import contextvars
import json

import pytest

from data_agent.ask_pipeline import Outcome
from data_agent.ask_schemas import ChartChoice, ExplainerReply, PlannerReply, ReplyUnusable, phase_reply_parse
from data_agent.ask_tool import answer_result
from data_agent.charts import ChartUnusable, chart_spec_build
from data_agent.executor import QueryResult
from data_agent.result_checks import result_findings
from data_agent.sql_gate import sql_gate_check
from tests.data_agent.test_ask_pipeline import CATALOG


def test_a_reply_in_a_code_fence_with_prose_around_it_parses():
    text = 'Here you go:\n```json\n{"action": "answer", "restatedQuestion": "x", "extra": 1}\n```'
    assert phase_reply_parse(text, PlannerReply).restatedQuestion == "x"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no json here", "held no JSON object"),
        ('{"action": "answer",}', "did not parse"),
        ('{"action": "guess"}', "action"),
        ('{"action": ' + "[" * 10_000 + "]" * 10_000 + "}", "deeper than 64"),
    ],
)
def test_an_unusable_reply_says_what_is_wrong(text, problem):
    with pytest.raises(ReplyUnusable, match=problem):
        phase_reply_parse(text, PlannerReply)


def test_a_single_y_column_may_be_a_string():
    reply = phase_reply_parse(
        '{"narrative": "n", "chart": {"type": "pie", "x": "a", "y": "b"}}', ExplainerReply
    )
    assert reply.chart is not None
    assert reply.chart.y == ["b"]


COLUMNS = ["region", "orders", "revenue"]
ROWS = [["North", 3, 60.5], ["South", 1, "12345678901234567.89"]]


def test_pie_and_scatter_charts_take_their_numbers_from_the_rows():
    pie = chart_spec_build(
        choice=ChartChoice(type="pie", x="region", y=["revenue"]), columns=COLUMNS, rows=ROWS
    )
    assert pie["slices"] == [
        {"label": "North", "value": 60.5},
        {"label": "South", "value": 12345678901234567.89},
    ]
    scatter = chart_spec_build(
        choice=ChartChoice(type="scatter", x="orders", y=["revenue"]), columns=COLUMNS, rows=ROWS
    )
    assert scatter["points"] == [{"x": 3, "y": 60.5}, {"x": 1, "y": 12345678901234567.89}]


@pytest.mark.parametrize(
    "choice",
    [
        ChartChoice(type="bar", x="region", y=["profit"]),
        ChartChoice(type="bar", x="orders", y=["region"]),
        ChartChoice(type="scatter", x="region", y=["orders"]),
    ],
)
def test_a_chart_that_does_not_fit_the_result_is_refused(choice):
    with pytest.raises(ChartUnusable):
        chart_spec_build(choice=choice, columns=COLUMNS, rows=ROWS)


def _result(columns, rows, *, truncated=False) -> QueryResult:
    return QueryResult(columns=columns, rows=rows, truncated=truncated, row_count=len(rows), elapsed_ms=1.0)


def _gated(sql: str):
    return sql_gate_check(sql=sql, dialect="sqlite", allowed_tables=CATALOG.source_tables)


def test_empty_truncated_and_null_results_are_flagged():
    empty = result_findings(
        gated=_gated("SELECT id FROM orders"), result=_result(["id"], []), catalog=CATALOG
    )
    assert empty == ["The query returned no rows, so the answer is empty; its filters may be too narrow."]
    found = result_findings(
        gated=_gated("SELECT id, amount FROM orders"),
        result=_result(["id", "amount"], [[1, None], [2, 3]], truncated=True),
        catalog=CATALOG,
    )
    assert found[0].startswith("The result was cut at 2 rows")
    assert found[1].startswith("Column 'amount' is empty (null) in 1 of 2 rows")


def test_a_sum_over_the_one_side_of_a_join_is_flagged_and_a_count_distinct_is_not():
    fanned = "SELECT sum(r.id) FROM regions r JOIN orders o ON o.region_id = r.id"
    assert (
        "counted more than once"
        in result_findings(gated=_gated(fanned), result=_result(["s"], [[1]]), catalog=CATALOG)[0]
    )
    safe = [
        "SELECT count(DISTINCT r.id) FROM regions r JOIN orders o ON o.region_id = r.id",
        "SELECT r.name, sum(o.amount) FROM orders o JOIN regions r ON r.id = o.region_id GROUP BY r.name",
    ]
    for sql in safe:
        assert result_findings(gated=_gated(sql), result=_result(["s"], [[1]]), catalog=CATALOG) == []


def test_an_answer_lays_out_narrative_chart_lineage_and_caveats_in_order():
    outcome = Outcome(
        "answered",
        "Q?",
        narrative="North | leads.",
        charts=[{"type": "bar"}],
        lineage={"_type": "data_lineage"},
        caveats=["Few rows."],
        sql="SELECT 1",
        result=_result(["region", "note"], [["North", "a|b"]] * 25),
    )
    result = answer_result(outcome)
    texts = [block.text for block in result.content]  # type: ignore[union-attr]
    assert texts[0].startswith("North | leads.\n\n| region | note |\n| --- | --- |\n| North | a\\|b |")
    assert texts[0].endswith("_First 20 of 25 rows._")
    assert json.loads(texts[1]) == {"_type": "chart_specs", "charts": [{"type": "bar"}]}
    assert json.loads(texts[2]) == {"_type": "data_lineage"}
    assert texts[3] == "⚠️ Few rows."
    assert result.structured_content is not None
    # Last, the whole answer as JSON, for a client that shows its model only text.
    assert (len(texts), json.loads(texts[4])) == (5, result.structured_content)
    assert len(result.structured_content["rows"]) == 25


def test_a_note_outside_an_audited_call_is_dropped():
    from mcp_gateway.pipeline.audit_trail import _notes, audit_note

    # No call in progress: nothing to attach it to, no error, and nothing kept for a later call.
    outside = contextvars.copy_context()
    assert outside.run(audit_note, sql="SELECT 1") is None
    assert outside.run(_notes.get) is None
    # Whereas in a call (which is what the audit trail sets up), the note is kept for its row.
    during: dict[str, object] = {}
    outside.run(_notes.set, during)
    outside.run(audit_note, sql="SELECT 1")
    assert during == {"sql": "SELECT 1"}

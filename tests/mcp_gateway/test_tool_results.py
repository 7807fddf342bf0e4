"""What clients and their models see of a tool: schemas every common validator accepts, and the
structured content repeated as JSON text (bounded) for clients that show their model only text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from core.conf import gatehouse_settings
from data_agent.executor import json_cell
from mcp_gateway.kernel.registry import registry_load
from mcp_gateway.kernel.tool_results import ROWS_LEFT_OUT, TEXT_CUT, rows_within, structured_text, tool_result
from mcp_gateway.pipeline.server import server_build

# Keywords whose value is one schema, a list of schemas, or a map of names to schemas.
ONE_SCHEMA = ("items", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
TYPING_KEYWORDS = {"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"}


def _portability_problems(schema: Any, where: str) -> list[str]:
    if not isinstance(schema, dict):
        return []  # `true`/`false` are schemas too, and additionalProperties: true says what it means
    problems = []
    if schema == {}:
        problems.append(f"{where} is the empty schema {{}}")
    if isinstance(schema.get("type"), list):
        problems.append(f"{where} has a type array (split it into anyOf branches)")
    items = schema.get("items")
    if isinstance(items, dict) and not TYPING_KEYWORDS & set(items):
        problems.append(f"{where}.items has no type")
    for key in ONE_SCHEMA:
        problems += _portability_problems(schema.get(key), f"{where}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _portability_problems(schema["additionalProperties"], f"{where}.additionalProperties")
    for key in SCHEMA_LISTS:
        for i, sub in enumerate(schema.get(key) or ()):
            problems += _portability_problems(sub, f"{where}.{key}[{i}]")
    for key in SCHEMA_MAPS:
        for name, sub in (schema.get(key) or {}).items():
            problems += _portability_problems(sub, f"{where}.{key}.{name}")
    return problems


async def _listed_tools() -> list[Any]:
    server = server_build(registry=registry_load(module_paths=gatehouse_settings.GATEHOUSE_TOOLSETS))
    return list(await server.list_tools())


async def test_every_tool_schema_gives_each_value_and_item_a_concrete_type():
    tools = await _listed_tools()
    assert {"whoami", "run_query", "ask_question"} <= {t.name for t in tools}
    problems = []
    for listed in tools:
        Draft202012Validator.check_schema(listed.input_schema)
        problems += _portability_problems(listed.input_schema, f"{listed.name}.inputSchema")
        if listed.output_schema is not None:
            Draft202012Validator.check_schema(listed.output_schema)
            problems += _portability_problems(listed.output_schema, f"{listed.name}.outputSchema")
    assert problems == []


def test_the_schema_walk_finds_an_untyped_cell_and_an_empty_schema():
    # The shape run_query published before: rows.items.items was {}.
    rows = {"type": "array", "items": {"type": "array", "items": {}}}
    old = {"type": "object", "properties": {"rows": rows}}
    assert _portability_problems(old, "run_query") == [
        "run_query.properties.rows.items.items has no type",
        "run_query.properties.rows.items.items is the empty schema {}",
    ]
    assert _portability_problems({"type": "object", "properties": {}}, "t") == []
    assert _portability_problems({"type": ["string", "null"]}, "t") == [
        "t has a type array (split it into anyOf branches)"
    ]


async def test_run_query_publishes_its_cells_as_scalars():
    run_query = next(t for t in await _listed_tools() if t.name == "run_query")
    assert run_query.output_schema is not None
    cell = run_query.output_schema["properties"]["rows"]["items"]["items"]
    assert cell == {"anyOf": [{"type": t} for t in ("string", "number", "integer", "boolean", "null")]}


def test_an_array_or_json_cell_is_carried_as_its_json_text():
    assert json_cell([1, "a"]) == '[1,"a"]'
    assert json_cell({"k": [None]}) == '{"k":[null]}'
    assert json_cell(3) == 3
    assert json_cell(None) is None


def test_a_result_within_the_bound_is_its_json_text_whole():
    structured = {"columns": ["é"], "rows": [["ünïcode", 1, 2.5, True, None]], "rowCount": 1}
    text, note = structured_text(structured=structured)
    assert note is None
    assert json.loads(text) == structured


def test_a_result_past_the_bound_leaves_rows_out_of_the_text_and_says_how_many():
    rows = [[f"row {i:03}"] for i in range(100)]
    structured: dict[str, Any] = {"columns": ["n"], "rows": rows, "rowCount": 100}
    whole = len(json.dumps(structured, separators=(",", ":")))
    limit = whole // 2
    text, note = structured_text(structured=structured, max_bytes=limit)
    assert len(text.encode()) <= limit
    shown = json.loads(text)
    kept = len(shown["rows"])
    assert 0 < kept < 100
    assert shown == {**structured, "rows": rows[:kept]}
    # As many rows as fit: one more would pass the bound.
    one_more = {**structured, "rows": rows[: kept + 1]}
    assert len(json.dumps(one_more, separators=(",", ":"))) > limit
    assert note == ROWS_LEFT_OUT.format(shown=kept, total=100, limit=limit)


def test_a_result_too_large_without_its_rows_is_cut_and_says_so():
    structured = {"narrative": "x" * 1000, "rows": []}
    text, note = structured_text(structured=structured, max_bytes=100)
    assert len(text.encode()) <= 100
    assert note == TEXT_CUT.format(limit=100, size=len(json.dumps(structured, separators=(",", ":"))))


def test_a_tool_result_has_its_summary_first_and_the_structured_content_last_and_whole():
    structured = {"rows": [[i] for i in range(60_000)]}
    result = tool_result(structured=structured, summary=["60,000 rows."])
    texts = [block.text for block in result.content]  # type: ignore[union-attr]
    assert texts[0] == "60,000 rows."
    assert texts[1].startswith("The JSON below holds the first ")
    assert json.loads(texts[2])["rows"] == structured["rows"][: len(json.loads(texts[2])["rows"])]
    assert result.structured_content == structured


@pytest.mark.parametrize("rows", [[], [["a"]]])
def test_a_small_tool_result_is_summary_then_json(rows):
    result = tool_result(structured={"rows": rows}, summary=["s"])
    summary, text = (block.text for block in result.content)  # type: ignore[union-attr]
    assert (summary, json.loads(text)) == ("s", {"rows": rows})


def test_rows_within_counts_every_character_outside_ascii_at_its_escaped_size():
    ascii_rows = [["abcd"]] * 10  # ["abcd"] is 8 bytes; with brackets and commas 2 + 8n + (n - 1)
    assert rows_within(rows=ascii_rows, max_bytes=2 + 8 * 3 + 2) == 3
    assert rows_within(rows=ascii_rows, max_bytes=2 + 8 * 3 + 1) == 2
    wide = [["\u00e9\u4e2d\U0001f600"]]  # escaped: \u00e9 \u4e2d \ud83d\ude00, 4 + 6 * 4 bytes
    assert rows_within(rows=wide, max_bytes=2 + 28) == 1
    assert rows_within(rows=wide, max_bytes=2 + 27) == 0
    assert rows_within(rows=[], max_bytes=0) == 0

"""The messages each LLM phase of ``ask_question`` receives.

The prompts ask for JSON of the shapes in ``ask_schemas``. Nothing here is a safety measure: the
SQL gate and the executor enforce what may run, whatever a prompt says or a model answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from typing import Any

import yaml

from data_agent.executor import QueryResult
from data_agent.selectors import Catalog, CatalogDataset

Messages = list[dict[str, str]]
# Rows a model sees of a result: enough to judge and describe it, never the whole of a big one.
ROWS_SHOWN_TO_VERIFIER = 20
ROWS_SHOWN_TO_EXPLAINER = 50

PLANNER = """You plan answers to questions about a company's data for a data agent.
Decide one of:
- "answer": the question can be answered from the datasets listed. Restate it precisely, applying
  the person's preferences (for example their default time period when the question names none)
  and today's date to relative periods; list any assumption you make.
- "clarify": the question is ambiguous in a way that would change the answer (which metric, which
  period when no default applies, which entity). Ask at most 3 short questions, each with a few
  suggested answers.
- "cannot_answer": the datasets do not hold the data needed. Say what data is missing.
Reply with only a JSON object:
{"action": "answer"|"clarify"|"cannot_answer", "restatedQuestion": "...", "assumptions": ["..."],
 "clarifications": [{"question": "...", "suggestions": ["..."]}], "missingData": ["..."]}"""

NAVIGATOR = """You choose the datasets and joins a SQL query needs to answer a question.
Use only datasets and fields from the ontology below, joined along its relationships.
If something the question needs is in no dataset, list it under "missing".
Reply with only a JSON object:
{"datasets": ["dataset name", ...], "joins": [{"left": "dataset.field", "right": "dataset.field"}],
 "missing": ["..."], "notes": "..."}"""

SQL_BUILDER = """You write one read-only SQL SELECT ({dialect} dialect) that answers a question.
Rules: a single SELECT (CTEs allowed); only the tables and columns listed (use each dataset's
source table and each field's source column); no comments; give computed columns short
snake_case aliases; order the result sensibly; prefer aggregates over raw rows. At most
{max_rows} rows will be returned. Beware joins that repeat rows (one order, many order lines)
before summing or counting: use COUNT(DISTINCT ...) or aggregate in a subquery.
Reply with only a JSON object: {{"sql": "...", "explanation": "..."}}"""

VERIFIER = """You check a query result before it is used to answer a question.
Look for: a result that cannot answer the question, suspicious row counts, joins that repeat rows
and inflate sums or counts, nulls that distort totals, empty answers, and periods that do not
match the question. The automatic checks already found the findings listed; add what they missed.
Reply with only a JSON object: {"ok": true|false, "caveats": ["one sentence each", ...]}"""

EXPLAINER = """You answer a person's question from a query result, in concise markdown.
Lead with the answer, cite the figures from the result exactly as given, mention the period and
the caveats that matter. Do not invent figures. A table of the result is appended after your text
by the system, so do not repeat the whole result. When a chart would help, choose one:
bar or line (x: the category or time column; y: one or more numeric columns), pie (x: the label
column; y: one numeric column, for shares of a whole) or scatter (x and y: numeric columns).
Reply with only a JSON object:
{"narrative": "markdown", "chart": null | {"type": "bar"|"line"|"pie"|"scatter", "title": "...",
 "x": "column", "y": ["column", ...]}}"""


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100).strip()


def _dataset_brief(dataset: CatalogDataset) -> dict[str, Any]:
    return {"name": dataset.name, "description": dataset.description}


def _dataset_full(dataset: CatalogDataset) -> dict[str, Any]:
    return {
        "name": dataset.name,
        "description": dataset.description,
        "source_table": dataset.source_table,
        "fields": [
            {"name": f.name, "type": f.type, "source_column": f.source_column, "description": f.description}
            for f in dataset.fields
        ],
    }


def _relationships(catalog: Catalog, datasets: Sequence[str] | None = None) -> list[str]:
    return [
        f"{j.from_dataset}.{j.from_column} -> {j.to_dataset}.{j.to_column} (many to one)"
        for j in catalog.joins
        if datasets is None or (j.from_dataset in datasets and j.to_dataset in datasets)
    ]


def planner_messages(
    *,
    question: str,
    catalog: Catalog,
    today: date,
    preferences: dict[str, str],
    clarifications: Sequence[tuple[str, str]] = (),
) -> Messages:
    context = {
        "today": today.isoformat(),
        "ontology": {"name": catalog.name, "description": catalog.description},
        "datasets": [_dataset_brief(d) for d in catalog.datasets],
        "preferences": preferences or "none",
    }
    if clarifications:
        context["the person already clarified"] = [{"question": q, "answer": a} for q, a in clarifications]
    return [
        {"role": "system", "content": PLANNER},
        {"role": "user", "content": f"{_dump(context)}\n\nQuestion: {question}"},
    ]


def navigator_messages(*, question: str, catalog: Catalog) -> Messages:
    context = {
        "datasets": [_dataset_full(d) for d in catalog.datasets],
        "relationships": _relationships(catalog),
    }
    return [
        {"role": "system", "content": NAVIGATOR},
        {"role": "user", "content": f"{_dump(context)}\n\nQuestion: {question}"},
    ]


def sql_builder_messages(
    *,
    question: str,
    assumptions: Sequence[str],
    catalog: Catalog,
    datasets: Sequence[str],
    today: date,
    max_rows: int,
) -> Messages:
    chosen = [d for d in catalog.datasets if d.name in datasets]
    context = {
        "today": today.isoformat(),
        "datasets": [_dataset_full(d) for d in chosen],
        "relationships": _relationships(catalog, datasets),
        "assumptions": list(assumptions) or "none",
    }
    system = SQL_BUILDER.format(
        dialect="PostgreSQL" if catalog.dialect == "postgres" else "SQLite", max_rows=max_rows
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"{_dump(context)}\n\nQuestion: {question}"},
    ]


def sql_retry_message(*, sql: str, problem: str) -> Messages:
    """The builder's refused query and why, for its one second attempt."""
    return [
        {"role": "assistant", "content": json.dumps({"sql": sql})},
        {"role": "user", "content": f"That query was refused: {problem} Write a corrected query."},
    ]


def _result_context(*, question: str, sql: str, result: QueryResult, rows_shown: int) -> dict[str, Any]:
    return {
        "question": question,
        "sql": sql,
        "rowCount": result.row_count,
        "truncated": result.truncated,
        "columns": list(result.columns),
        "rows": [list(r) for r in result.rows[:rows_shown]],
    }


def verifier_messages(*, question: str, sql: str, result: QueryResult, findings: Sequence[str]) -> Messages:
    context = _result_context(question=question, sql=sql, result=result, rows_shown=ROWS_SHOWN_TO_VERIFIER)
    context["automaticFindings"] = list(findings) or "none"
    return [
        {"role": "system", "content": VERIFIER},
        {"role": "user", "content": json.dumps(context, default=str)},
    ]


def explainer_messages(
    *, question: str, sql: str, result: QueryResult, caveats: Sequence[str], assumptions: Sequence[str]
) -> Messages:
    context = _result_context(question=question, sql=sql, result=result, rows_shown=ROWS_SHOWN_TO_EXPLAINER)
    context["caveats"] = list(caveats)
    context["assumptions"] = list(assumptions)
    return [
        {"role": "system", "content": EXPLAINER},
        {"role": "user", "content": json.dumps(context, default=str)},
    ]

"""``run_query``: SQL a client planned itself, through the same gate, limits and lineage as
``ask_question``, with no LLM. The audit event of each call records the SQL as it ran."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field, StringConstraints

from core.db import db_call
from data_agent.arguments import OntologyId
from data_agent.executor import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_SECONDS, QueryResult
from data_agent.query_run import query_gate_and_run
from data_agent.scopes import SCOPE_DATA_AGENT_WRITE, SCOPE_ONTOLOGIES_READ
from data_agent.selectors import (
    data_source_url,
    ontology_datasets,
    ontology_get_ready,
)
from data_agent.sql_gate import SQL_MAX_CHARS
from mcp_gateway.audit_trail import audit_note
from mcp_gateway.identity import identity_from_context
from mcp_gateway.registry import tool

TRUNCATED_NOTE = f"The first {DEFAULT_MAX_ROWS:,} rows are shown: the result had more and was cut there."


class QueryAnswer(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    rowCount: int = Field(description="Rows returned (at most 10,000).")
    truncated: bool = Field(description="True when the query had more rows than were returned.")
    sql: str = Field(description="The SQL that ran: the query as the gate rebuilt it, comments dropped.")
    lineage: dict[str, Any] = Field(
        description='{"_type": "data_lineage", datasets, joins, filters, timeWindow, grain}'
    )


@dataclass(frozen=True)
class _Source:
    kind: str
    url: str
    allowed_tables: frozenset[str]
    datasets_by_table: dict[str, str]


def _source_for_query(*, tenant_id: int, ontology_id: str) -> _Source:
    ontology = ontology_get_ready(tenant_id=tenant_id, ontology_id=ontology_id)
    datasets_by_table = {d.source_table: d.name for d in ontology_datasets(ontology=ontology)}
    return _Source(
        kind=ontology.data_source.kind,
        url=data_source_url(data_source=ontology.data_source),
        allowed_tables=frozenset(datasets_by_table),
        datasets_by_table=datasets_by_table,
    )


def _summary(result: QueryResult, datasets: list[str]) -> str:
    rows = f"{result.row_count:,} row{'s' if result.row_count != 1 else ''}"
    sources = ", ".join(datasets) or "no dataset"
    text = f"{rows} ({', '.join(result.columns)}) from {sources}, in {result.elapsed_ms:g} ms."
    return f"{TRUNCATED_NOTE} {text}" if result.truncated else text


@tool(
    name="run_query",
    title="Run a read-only SQL query",
    description=(
        "Run one read-only SELECT over an ontology's datasets (their source tables) and return the rows "
        "with the query's data lineage. Writes, DDL, several statements, system catalogs, tables outside "
        f"the ontology and functions outside a safe allowlist are refused. At most {DEFAULT_MAX_ROWS:,} "
        f"rows; {DEFAULT_TIMEOUT_SECONDS:g} s limit."
    ),
    scopes=[SCOPE_ONTOLOGIES_READ, SCOPE_DATA_AGENT_WRITE],
    read_only=True,
    timeout_seconds=45,
    secret_arguments=(),
)
async def run_query(
    ontologyId: OntologyId,
    sql: Annotated[
        str,
        StringConstraints(min_length=1, max_length=SQL_MAX_CHARS),
        Field(description="One SELECT over the ontology's source tables (see its datasets' `source`)."),
    ],
    ctx: Context,
) -> Annotated[CallToolResult, QueryAnswer]:
    identity = identity_from_context(ctx)
    source = await db_call(_source_for_query, tenant_id=identity.tenant_id, ontology_id=ontologyId)
    run = await asyncio.to_thread(
        query_gate_and_run,
        sql=sql,
        kind=source.kind,
        url=source.url,
        allowed_tables=source.allowed_tables,
        datasets_by_table=source.datasets_by_table,
    )
    result, lineage = run.result, run.lineage
    audit_note(sql=run.gated.sql, rowCount=result.row_count, truncated=result.truncated)
    answer = QueryAnswer(
        columns=result.columns,
        rows=result.rows,
        rowCount=result.row_count,
        truncated=result.truncated,
        sql=run.gated.sql,
        lineage=lineage,
    )
    return CallToolResult(
        content=[TextContent(type="text", text=_summary(result, [d["name"] for d in lineage["datasets"]]))],
        structured_content=answer.model_dump(mode="json"),
    )

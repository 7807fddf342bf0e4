"""``run_query``: SQL a client planned itself, through the same gate, limits and lineage as
``ask_question``, with no LLM. The audit event of each call records the SQL as it ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import BaseModel, Field, StringConstraints

from core.conf import gatehouse_settings
from core.identity import Identity
from data_agent.arguments import OntologyId
from data_agent.catalogue import catalogue_get
from data_agent.executor import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_SECONDS, Cell, QueryResult
from data_agent.query_pool import QuerySource, query_run_fairly
from data_agent.query_slots import QueryCaller
from data_agent.scopes import SCOPE_DATA_AGENT_WRITE, SCOPE_ONTOLOGIES_READ
from data_agent.selectors import (
    data_source_url,
    ontology_datasets,
    ontology_get_ready,
)
from data_agent.sql_gate import SQL_MAX_CHARS, sql_gate_check
from mcp_gateway.kernel.identity import identity_from_context
from mcp_gateway.kernel.registry import tool
from mcp_gateway.kernel.tool_results import rows_within, tool_result
from mcp_gateway.pipeline.audit_trail import audit_note
from mcp_gateway.pipeline.call_policies import call_policy_add

TRUNCATED_NOTE = f"The first {DEFAULT_MAX_ROWS:,} rows are shown: the result had more and was cut there."
# The whole answer must reach the official SDK client, which refuses a server-sent event larger than
# 1 MiB (its streamable HTTP transport's max_sse_event_size): the rows take at most this many bytes
# of JSON, the text block at most TEXT_JSON_MAX_BYTES more, with room left for the rest.
ANSWER_ROWS_MAX_BYTES = 700_000
SIZE_CUT_NOTE = (
    "The first {shown:,} rows are shown: the rows after them would make the answer larger than "
    f"{ANSWER_ROWS_MAX_BYTES:,} bytes, more than MCP clients take in one message. Narrow the query "
    "(fewer columns, a WHERE, an aggregate or a LIMIT) to see the rest."
)


class QueryAnswer(BaseModel):
    columns: list[str]
    rows: list[list[Cell]]
    rowCount: int = Field(description="Rows returned (at most 10,000, and at most 700,000 bytes of them).")
    truncated: bool = Field(description="True when the query had more rows than were returned.")
    sql: str = Field(description="The SQL that ran: the query as the gate rebuilt it, comments dropped.")
    lineage: dict[str, Any] = Field(
        description='{"_type": "data_lineage", datasets, joins, filters, timeWindow, grain}'
    )


def query_source_for(*, tenant_id: int, ontology_id: str) -> QuerySource:
    """The tenant's ready ontology as a query needs it; NotFound or NotReady as ``ontology_get_ready``."""
    ontology = ontology_get_ready(tenant_id=tenant_id, ontology_id=ontology_id)
    datasets_by_table = {d.source_table: d.name for d in ontology_datasets(ontology=ontology)}
    return QuerySource(
        id=ontology.data_source_id,
        kind=ontology.data_source.kind,
        url=data_source_url(data_source=ontology.data_source),
        allowed_tables=frozenset(datasets_by_table),
        datasets_by_table=datasets_by_table,
    )


def query_answer(*, result: QueryResult, lineage: dict[str, Any], sql: str) -> tuple[QueryAnswer, str]:
    """A query's answer, as ``run_query`` and a workflow's query command give it (its rows within
    ``ANSWER_ROWS_MAX_BYTES``), and its summary in one sentence for a person: rows, columns,
    datasets and time, with why rows were left out first."""
    shown = rows_within(rows=result.rows, max_bytes=ANSWER_ROWS_MAX_BYTES)
    cut_for_size = shown < len(result.rows)
    answer = QueryAnswer(
        columns=result.columns,
        rows=result.rows[:shown],
        rowCount=shown,
        truncated=result.truncated or cut_for_size,
        sql=sql,
        lineage=lineage,
    )
    rows = f"{shown:,} row{'s' if shown != 1 else ''}"
    sources = ", ".join(d["name"] for d in lineage["datasets"]) or "no dataset"
    text = f"{rows} ({', '.join(result.columns)}) from {sources}, in {result.elapsed_ms:g} ms."
    if cut_for_size:
        text = f"{SIZE_CUT_NOTE.format(shown=shown)} {text}"
    elif result.truncated:
        text = f"{TRUNCATED_NOTE} {text}"
    return answer, text


async def sql_gate_before_counting(*, identity: Identity, tool: str, arguments: Mapping[str, Any]) -> None:
    """``run_query``'s SQL is judged by the gate before the call is counted (a call policy): a query
    the gate refuses costs the person none of their calls. The tool runs the gate again on the SQL
    it is given, so this is never the only check."""
    if tool != "run_query":
        return
    sql, ontology_id = arguments.get("sql"), arguments.get("ontologyId")
    if not isinstance(sql, str) or not isinstance(ontology_id, str):
        return
    source = (await catalogue_get(tenant_id=identity.tenant_id, ontology_id=ontology_id)).source
    sql_gate_check(sql=sql, dialect=source.kind, allowed_tables=source.allowed_tables)


call_policy_add(sql_gate_before_counting)


@tool(
    name="run_query",
    title="Run a read-only SQL query",
    description=(
        "Run one read-only SELECT over an ontology's datasets (their source tables) and return the rows "
        "with the query's data lineage. Writes, DDL, several statements, system catalogs, tables outside "
        f"the ontology and functions outside a safe allowlist are refused. At most {DEFAULT_MAX_ROWS:,} "
        f"rows; a time limit ({DEFAULT_TIMEOUT_SECONDS:g} s unless the operator changed it). A person may "
        "have only a few queries running at once: one more is refused at once (-32029, with "
        "retryAfterSeconds), never queued."
    ),
    scopes=[SCOPE_ONTOLOGIES_READ, SCOPE_DATA_AGENT_WRITE],
    read_only=True,
    # The query's own limit ends it first, with a clearer message; this is the backstop.
    timeout_seconds=lambda: gatehouse_settings.DATA_AGENT_QUERY_TIMEOUT_SECONDS + 15,
    # Not the tighter "expensive" default: a person exploring data runs many small queries. What a
    # query costs the data source is bounded by the per-person query slots and the time limit;
    # the rate limit (RATE_LIMIT_TOOL) only stops a runaway loop.
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
    source = (await catalogue_get(tenant_id=identity.tenant_id, ontology_id=ontologyId)).source
    caller = QueryCaller(tenant_id=identity.tenant_id, user_id=identity.user_id)
    run = await query_run_fairly(caller=caller, source=source, sql=sql)
    answer, summary = query_answer(result=run.result, lineage=run.lineage, sql=run.gated.sql)
    audit_note(sql=run.gated.sql, rowCount=answer.rowCount, truncated=answer.truncated)
    # The summary for a person, then the rows themselves for a client that shows its model only text.
    return tool_result(structured=answer.model_dump(mode="json"), summary=[summary])

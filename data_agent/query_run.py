"""One client- or model-written query, start to finish: the gate, the executor and the lineage.

sqlglot's parsing is CPU work and the executor's driver blocks, so this runs on a worker thread of
the query's data source (``data_agent.query_pool``, which also applies the fair-use limits) and the
event loop keeps serving other requests meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from data_agent.executor import DEFAULT_TIMEOUT_SECONDS, QueryCancel, QueryResult, query_execute
from data_agent.lineage import lineage_from_query
from data_agent.sql_gate import GatedQuery, sql_gate_check
from data_agent.sql_parameters import sql_parameters_bind


@dataclass(frozen=True)
class QueryRun:
    gated: GatedQuery
    result: QueryResult
    lineage: dict[str, Any]


def query_gate_and_run(
    *,
    sql: str,
    kind: str,
    url: str,
    allowed_tables: frozenset[str],
    datasets_by_table: Mapping[str, str],
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    cancel: QueryCancel | None = None,
    params: Mapping[str, Any] | None = None,
) -> QueryRun:
    """Raises InvalidInput when the gate or the database refuses the query (or ``params`` do not
    match its ``:name`` placeholders), Timeout past the statement timeout and Unavailable when the
    source cannot be reached. ``params`` are bound, never pasted into the SQL."""
    gated = sql_gate_check(sql=sql, dialect=kind, allowed_tables=allowed_tables)
    if params is None:
        text, values = gated.sql, None
    else:
        text, values = sql_parameters_bind(gated=gated, params=params)
    result = query_execute(
        url=url, kind=kind, sql=text, timeout_seconds=timeout_seconds, cancel=cancel, params=values
    )
    return QueryRun(
        gated=gated, result=result, lineage=lineage_from_query(gated, datasets_by_table=datasets_by_table)
    )

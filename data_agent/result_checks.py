"""The verifier's automatic checks of a result: the ones code can decide without a model.

Empty and truncated results, nulls, and join fan-out (a sum or count over a table joined to
another that holds many rows for each of its rows, which counts each row once per match).
"""

from __future__ import annotations

from sqlglot import exp

from data_agent.executor import QueryResult
from data_agent.selectors import Catalog
from data_agent.sql_gate import GatedQuery


def result_findings(*, gated: GatedQuery, result: QueryResult, catalog: Catalog) -> list[str]:
    findings: list[str] = []
    if result.row_count == 0:
        findings.append("The query returned no rows, so the answer is empty; its filters may be too narrow.")
    if result.truncated:
        findings.append(
            f"The result was cut at {result.row_count:,} rows; figures computed from it are incomplete."
        )
    findings.extend(_null_findings(result))
    findings.extend(_fan_out_findings(gated, catalog))
    return findings


def _null_findings(result: QueryResult) -> list[str]:
    if not result.rows:
        return []
    found = []
    for index, column in enumerate(result.columns):
        nulls = sum(1 for row in result.rows if row[index] is None)
        if nulls:
            found.append(
                f"Column {column!r} is empty (null) in {nulls:,} of {result.row_count:,} rows;"
                " totals and averages leave those rows out."
            )
    return found


def _fan_out_findings(gated: GatedQuery, catalog: Catalog) -> list[str]:
    tree = gated.expression
    tables_by_alias: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        tables_by_alias[(table.alias_or_name or "").lower()] = table.name.lower()
    joined = set(tables_by_alias.values())
    if len(joined) < 2:
        return []
    datasets_by_table = {t.lower(): name for t, name in catalog.datasets_by_table.items()}
    columns_by_table = {
        d.source_table.lower(): {f.source_column.lower() for f in d.fields} for d in catalog.datasets
    }
    # Tables on the "one" side of a relationship whose "many" side is also in the query.
    table_of_dataset = {name: table for table, name in datasets_by_table.items()}
    multiplied: dict[str, str] = {}
    for join in catalog.joins:
        one, many = table_of_dataset.get(join.to_dataset), table_of_dataset.get(join.from_dataset)
        if one in joined and many in joined and one != many:
            multiplied.setdefault(one, many)

    findings = []
    for aggregate in tree.find_all(exp.Sum, exp.Avg, exp.Count):
        if isinstance(aggregate.this, exp.Distinct):
            continue
        for column in aggregate.find_all(exp.Column):
            owner = _table_of(column, tables_by_alias, columns_by_table, joined)
            if owner is not None and owner in multiplied:
                one, many = (datasets_by_table.get(t, t) for t in (owner, multiplied[owner]))
                finding = (
                    f"{aggregate.sql(dialect=gated.dialect)} aggregates {one} joined to {many}, which has "
                    "many rows for each of its rows: each may be counted more than once."
                )
                if finding not in findings:
                    findings.append(finding)
    return findings


def _table_of(
    column: exp.Column,
    tables_by_alias: dict[str, str],
    columns_by_table: dict[str, set[str]],
    joined: set[str],
) -> str | None:
    if column.table:
        return tables_by_alias.get(column.table.lower())
    owners = [t for t in joined if column.name.lower() in columns_by_table.get(t, set())]
    return owners[0] if len(owners) == 1 else None

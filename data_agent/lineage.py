"""Data lineage read off a gated query's tree: which datasets, joined how, filtered how, at what grain.

It is derived from the SQL that actually ran (never from what a model says it did), and speaks in
the ontology's dataset names rather than source tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from data_agent.sql_gate import GatedQuery

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}(:?\d{2})?|Z)?)?$")
_TEMPORAL_TYPES = frozenset({"DATE", "TIMESTAMP", "TIMESTAMPTZ", "DATETIME"})
_LOWER_BOUNDS = (exp.GT, exp.GTE)
_UPPER_BOUNDS = (exp.LT, exp.LTE)


def lineage_from_query(gated: GatedQuery, *, datasets_by_table: Mapping[str, str]) -> dict[str, Any]:
    """``{"_type": "data_lineage", datasets, joins, filters, timeWindow, grain}`` for ``gated``.

    ``datasets_by_table`` maps a source table (as the gate reports it) to its dataset name.
    """
    tree = gated.expression
    dialect = gated.dialect

    def name_of(table: str) -> str:
        return datasets_by_table.get(table, table)

    joins = []
    for join in tree.find_all(exp.Join):
        target = join.this
        on = join.args.get("on")
        using = join.args.get("using")
        joins.append(
            {
                "kind": " ".join(filter(None, (join.side, join.kind))) or "INNER",
                "dataset": name_of(target.name) if isinstance(target, exp.Table) else "subquery",
                "on": on.sql(dialect=dialect) if on is not None else None,
                "using": [u.sql(dialect=dialect) for u in using] if using else None,
            }
        )

    predicates: list[exp.Expr] = []
    for clause in (*tree.find_all(exp.Where), *tree.find_all(exp.Having)):
        condition = clause.this
        predicates.extend(condition.flatten() if isinstance(condition, exp.And) else [condition])

    return {
        "_type": "data_lineage",
        "datasets": [{"name": name_of(table), "sourceTable": table} for table in gated.tables],
        "joins": joins,
        "filters": [p.sql(dialect=dialect) for p in predicates],
        "timeWindow": _time_window(predicates, dialect=dialect),
        "grain": _grain(tree, dialect=dialect),
    }


def _temporal_literal(node: exp.Expr) -> str | None:
    """The ISO date/time a literal (or a cast of one) stands for, if it is one."""
    if isinstance(node, exp.Cast) and node.to.this in {exp.DataType.Type[t] for t in _TEMPORAL_TYPES}:
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string and _ISO_DATE.match(node.this):
        return str(node.this)
    return None


def _time_window(predicates: list[exp.Expr], *, dialect: str) -> dict[str, Any] | None:
    """The first column compared with date/time literals, and the bounds it was given."""
    window: dict[str, Any] | None = None
    for predicate in predicates:
        bounds: list[tuple[str, str, str]] = []  # (column, side, value)
        if isinstance(predicate, exp.Between) and isinstance(predicate.this, exp.Column):
            low, high = _temporal_literal(predicate.args["low"]), _temporal_literal(predicate.args["high"])
            column = predicate.this.sql(dialect=dialect)
            if low and high:
                bounds = [(column, "from", low), (column, "to", high)]
        elif isinstance(predicate, (*_LOWER_BOUNDS, *_UPPER_BOUNDS, exp.EQ)):
            left, right = predicate.this, predicate.expression
            flipped = not isinstance(left, exp.Column)
            column_node, value_node = (right, left) if flipped else (left, right)
            value = _temporal_literal(value_node)
            if isinstance(column_node, exp.Column) and value:
                column = column_node.sql(dialect=dialect)
                if isinstance(predicate, exp.EQ):
                    bounds = [(column, "from", value), (column, "to", value)]
                else:
                    lower = isinstance(predicate, _LOWER_BOUNDS) != flipped
                    bounds = [(column, "from" if lower else "to", value)]
        for column, side, value in bounds:
            if window is None:
                window = {"column": column, "from": None, "to": None}
            if window["column"] == column:
                window[side] = value
    return window


def _grain(tree: exp.Expr, *, dialect: str) -> dict[str, Any]:
    """GROUP BY of the outermost SELECT: one row per group, one row in total, or row level."""
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return {"level": "row", "by": []}
    group = select.args.get("group")
    if group is not None and group.expressions:
        by = [_group_key(select, g).sql(dialect=dialect) for g in group.expressions]
        return {"level": "group", "by": by}
    if any(e.find(exp.AggFunc) for e in select.expressions):
        return {"level": "total", "by": []}
    return {"level": "row", "by": []}


def _group_key(select: exp.Select, key: exp.Expr) -> exp.Expr:
    """``GROUP BY 1`` means the first select expression; lineage names it."""
    if isinstance(key, exp.Literal) and key.is_int:
        index = int(key.this) - 1
        if 0 <= index < len(select.expressions):
            return select.expressions[index].unalias()
    return key

"""The SQL gate: the one place that decides whether a query may run against a tenant's data source.

Safety is enforced here, by parsing, not by asking a model nicely. A query passes only if it is
exactly one SELECT (CTEs, UNION and subqueries are fine) that reads nothing but the ontology's
tables and calls nothing but allowlisted, side-effect-free functions. The SQL that runs is rendered
from the parsed tree, so comments and anything the parser did not understand never reach the
database. The executor's read-only transaction and timeout are the second line, not the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from core.errors import InvalidInput

SQL_MAX_CHARS = 20_000
DIALECTS = frozenset({"postgres", "sqlite"})

SQL_REFUSED = "The SQL was refused: only a single read-only SELECT over the ontology's tables may run."
SQL_TOO_LONG = f"The SQL was refused: it is longer than {SQL_MAX_CHARS} characters."
SQL_UNPARSABLE = "The SQL was refused: it could not be parsed."
SQL_NOT_ONE_STATEMENT = "The SQL was refused: send exactly one statement."
SQL_NOT_SELECT = "The SQL was refused: only SELECT queries may run."
SQL_WRITES = "The SQL was refused: it writes, changes the schema or controls the session."
SQL_LOCKS = (
    "The SQL was refused: SELECT ... INTO and locking clauses (FOR UPDATE, FOR SHARE) are not allowed."
)
SQL_SYSTEM_CATALOG = "The SQL was refused: system catalogs and schemas are not readable."
SQL_UNKNOWN_TABLE = "The SQL was refused: it reads a table that is not in this ontology."
SQL_TABLE_FUNCTION = "The SQL was refused: table functions are not allowed in FROM."
SQL_FUNCTION = "The SQL was refused: it calls a function that is not on the allowlist."
SQL_TYPE = "The SQL was refused: it casts to a type that is not on the allowlist."

# Functions by sqlglot's canonical name (``Func.sql_name()``; e.g. PostgreSQL's date_trunc parses
# as TIMESTAMP_TRUNC): aggregates, window functions, conditionals, casts, date/time, string and
# math. All of them are pure. Anything else, including every function sqlglot does not know
# (``pg_sleep``, ``pg_read_file``, ``dblink``, ``set_config``, ``nextval``, ``lo_*``,
# ``load_extension``, ``current_setting``, ``version``), is refused.
ALLOWED_FUNCTIONS = frozenset(
    {
        # Boolean connectives and conditionals (sqlglot models these as functions too).
        "AND", "OR", "XOR", "NOT", "CASE", "IF", "COALESCE", "NULLIF", "GREATEST", "LEAST",
        "CAST", "TRY_CAST", "EXISTS", "ARRAY", "ANY", "ALL",
        # Aggregates.
        "COUNT", "SUM", "AVG", "MIN", "MAX", "STDDEV", "STDDEV_POP", "STDDEV_SAMP", "VARIANCE",
        "VARIANCE_POP", "CORR", "MEDIAN", "MODE", "PERCENTILE_CONT", "PERCENTILE_DISC",
        "ARRAY_AGG", "GROUP_CONCAT", "STRING_AGG", "LOGICAL_AND", "LOGICAL_OR", "COUNT_IF",
        "APPROX_DISTINCT",
        # Window functions.
        "ROW_NUMBER", "RANK", "DENSE_RANK", "PERCENT_RANK", "CUME_DIST", "NTILE", "LAG", "LEAD",
        "FIRST_VALUE", "LAST_VALUE", "NTH_VALUE",
        # Date and time.
        "CURRENT_DATE", "CURRENT_TIMESTAMP", "CURRENT_TIME", "DATE", "EXTRACT", "DATE_TRUNC",
        "TIMESTAMP_TRUNC", "DATE_ADD", "DATE_SUB", "DATE_DIFF", "DATEDIFF", "TIME_TO_STR",
        "STR_TO_DATE", "STR_TO_TIME", "TS_OR_DS_TO_DATE", "TS_OR_DS_TO_TIMESTAMP", "UNIX_TO_TIME",
        "JUSTIFY_DAYS", "JUSTIFY_HOURS", "YEAR", "MONTH", "DAY", "QUARTER", "WEEK",
        # Strings.
        "LOWER", "UPPER", "LENGTH", "SUBSTRING", "TRIM", "CONCAT", "CONCAT_WS", "REPLACE",
        "LEFT", "RIGHT", "PAD", "SPLIT_PART", "STR_POSITION", "INITCAP", "REGEXP_REPLACE",
        "REGEXP_LIKE", "STARTS_WITH", "REVERSE", "MD5",
        # Math.
        "ABS", "CEIL", "FLOOR", "ROUND", "TRUNC", "SQRT", "POWER", "LN", "LOG", "EXP", "MOD",
        "SIGN",
    }
)  # fmt: skip

# Functions sqlglot does not model (they parse as ``Anonymous``), by lower-case name.
ALLOWED_ANONYMOUS_FUNCTIONS = frozenset(
    {
        "age", "make_date", "date_part", "to_char", "date", "time", "datetime", "julianday", "strftime",
        "total", "ifnull",
    }
)  # fmt: skip

# Cast targets: plain scalar types. ``regclass``, ``oid`` and friends would look up the catalogs.
ALLOWED_TYPES = frozenset(
    {
        "BOOLEAN", "SMALLINT", "INT", "BIGINT", "DECIMAL", "FLOAT", "DOUBLE", "TEXT", "VARCHAR",
        "CHAR", "NCHAR", "NVARCHAR", "DATE", "TIME", "TIMESTAMP", "TIMESTAMPTZ", "INTERVAL",
        "UUID",
    }
)  # fmt: skip

# Node types that write, change the schema, or control the session, wherever they appear (a
# PostgreSQL CTE may hold a DELETE ... RETURNING).
_FORBIDDEN_NODES: tuple[type[exp.Expr], ...] = (
    exp.DML, exp.DDL, exp.Command, exp.Copy, exp.Set, exp.Pragma, exp.Transaction, exp.Commit,
    exp.Rollback, exp.Use, exp.Merge, exp.TruncateTable, exp.Attach, exp.Detach, exp.Grant,
    exp.Analyze, exp.Describe, exp.Show, exp.Kill, exp.LoadData, exp.Cache, exp.Uncache, exp.Refresh,
)  # fmt: skip

_SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast", "temp", "sqlite_temp_schema"})
_SYSTEM_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_sequence"})
_DEFAULT_SCHEMA = {"postgres": "public", "sqlite": "main"}


@dataclass(frozen=True)
class GatedQuery:
    """A query the gate let through: the SQL to run (rendered from the tree) and what lineage needs."""

    sql: str
    dialect: str
    # The allowed table names it reads, as they appear in ``allowed_tables``, in order of first use.
    tables: tuple[str, ...]
    expression: exp.Expr


def _refuse(message: str, reason: str, **detail: Any) -> InvalidInput:
    return InvalidInput(message, data={"reason": reason, **detail})


def sql_gate_check(*, sql: str, dialect: str, allowed_tables: frozenset[str]) -> GatedQuery:
    """Parse and vet ``sql``; raise ``InvalidInput`` (-32602) with ``data.reason`` if it may not run."""
    if dialect not in DIALECTS:
        raise ValueError(f"Unknown SQL dialect {dialect!r}")
    # Before parsing: a huge input costs the parser, not just the database.
    if len(sql) > SQL_MAX_CHARS:
        raise _refuse(SQL_TOO_LONG, "too_long", maxChars=SQL_MAX_CHARS)
    try:
        # A trailing comment after the last semicolon parses as an empty statement; it is not one.
        statements = [
            s for s in sqlglot.parse(sql, read=dialect) if s is not None and not isinstance(s, exp.Semicolon)
        ]
    except SqlglotError as error:
        raise _refuse(SQL_UNPARSABLE, "unparsable") from error
    if len(statements) != 1:
        raise _refuse(SQL_NOT_ONE_STATEMENT, "statement_count", statements=len(statements))
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise _refuse(SQL_NOT_SELECT, "not_select", statement=type(tree).__name__)
    _check_nodes(tree)
    tables = _check_tables(tree, dialect=dialect, allowed_tables=allowed_tables)
    # Comments are dropped and the query is rebuilt from the tree: what runs is what was checked.
    rendered = tree.sql(dialect=dialect, comments=False)
    return GatedQuery(
        sql=rendered, dialect=dialect, tables=tables, expression=sqlglot.parse_one(rendered, read=dialect)
    )


def _check_nodes(tree: exp.Expr) -> None:
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise _refuse(SQL_WRITES, "writes", statement=type(node).__name__)
        if isinstance(node, exp.Into | exp.Lock):
            raise _refuse(SQL_LOCKS, "into_or_lock")
        if isinstance(node, exp.DataType) and _type_name(node) not in ALLOWED_TYPES:
            raise _refuse(SQL_TYPE, "type", type=_type_name(node))
        if isinstance(node, exp.Func):
            name = _function_name(node)
            # schema.fn(...) may name a user-defined function that merely shares an allowed name.
            if isinstance(node.parent, exp.Dot) and node.arg_key == "expression":
                raise _refuse(SQL_FUNCTION, "function", function=node.parent.sql())
            allowed = (
                name in ALLOWED_ANONYMOUS_FUNCTIONS
                if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc)
                else name in ALLOWED_FUNCTIONS
            )
            if not allowed:
                raise _refuse(SQL_FUNCTION, "function", function=name)


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        return str(node.name).lower()
    return node.sql_name()


def _type_name(node: exp.DataType) -> str:
    kind = node.this
    return kind.value if isinstance(kind, exp.DataType.Type) else str(kind).upper()


def _normalize(identifier: exp.Expr | None, *, dialect: str) -> str:
    """PostgreSQL folds unquoted names to lower case and keeps quoted ones; SQLite ignores case."""
    if not isinstance(identifier, exp.Identifier):
        return ""
    name = str(identifier.this)
    return name if identifier.quoted and dialect == "postgres" else name.lower()


def _check_tables(tree: exp.Expr, *, dialect: str, allowed_tables: frozenset[str]) -> tuple[str, ...]:
    allowed = allowed_tables if dialect == "postgres" else frozenset(t.lower() for t in allowed_tables)
    used: list[str] = []
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise _refuse(SQL_TABLE_FUNCTION, "table_function")
        name = _normalize(table.this, dialect=dialect)
        schema = _normalize(table.args.get("db"), dialect=dialect)
        catalog = _normalize(table.args.get("catalog"), dialect=dialect)
        if schema in _SYSTEM_SCHEMAS or name in _SYSTEM_TABLES or name.startswith("pg_"):
            raise _refuse(SQL_SYSTEM_CATALOG, "system_catalog", table=".".join(filter(None, (schema, name))))
        if not schema and not catalog and _is_cte_reference(table, name, dialect=dialect):
            continue
        key = f"{schema}.{name}" if schema else name
        if catalog:
            match = None
        elif key in allowed:
            match = key
        elif schema == _DEFAULT_SCHEMA[dialect] and name in allowed:
            match = name
        elif not schema and f"{_DEFAULT_SCHEMA[dialect]}.{name}" in allowed:
            match = f"{_DEFAULT_SCHEMA[dialect]}.{name}"
        else:
            match = None
        if match is None:
            raise _refuse(
                SQL_UNKNOWN_TABLE, "unknown_table", table=".".join(filter(None, (catalog, schema, name)))
            )
        if match not in used:
            used.append(match)
    return tuple(used)


def _is_cte_reference(table: exp.Table, name: str, *, dialect: str) -> bool:
    """Whether an unqualified name refers to a CTE in scope rather than a real table.

    A CTE is visible in its query's body and in the CTEs listed after it (all of them under
    WITH RECURSIVE), never in its own non-recursive body: there the name is the real table, and
    must pass the allowlist like any other.
    """
    child: exp.Expr = table
    parent = table.parent
    while parent is not None:
        with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            if child is with_:
                # Reached from inside one of this WITH's CTE bodies: which one?
                continue_from = next((c for c in ctes if _contains(c, table)), None)
                index = ctes.index(continue_from) if continue_from is not None else len(ctes)
                visible = ctes if with_.args.get("recursive") else ctes[:index]
            else:
                visible = ctes
            if any(_normalize(c.args["alias"].this, dialect=dialect) == name for c in visible):
                return True
        child, parent = parent, parent.parent
    return False


def _contains(ancestor: exp.Expr, node: exp.Expr) -> bool:
    current: exp.Expr | None = node
    while current is not None:
        if current is ancestor:
            return True
        current = current.parent
    return False

"""Attacks on the SQL gate, each its own test, and the queries it must let through."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from data_agent.lineage import lineage_from_query
from data_agent.sql_gate import (
    SQL_FUNCTION,
    SQL_LOCKS,
    SQL_MAX_CHARS,
    SQL_NOT_ONE_STATEMENT,
    SQL_NOT_SELECT,
    SQL_SYSTEM_CATALOG,
    SQL_TABLE_FUNCTION,
    SQL_TOO_LONG,
    SQL_TYPE,
    SQL_UNKNOWN_TABLE,
    SQL_UNPARSABLE,
    SQL_WRITES,
    GatedQuery,
    sql_gate_check,
)

ACME_TABLES = frozenset({"orders", "customers", "order_lines", "products", "regions"})
DATASETS = {"orders": "Orders", "customers": "Customers", "order_lines": "Order lines", "regions": "Regions"}


def gate(sql: str, *, dialect: str = "postgres", allowed: frozenset[str] = ACME_TABLES) -> GatedQuery:
    return sql_gate_check(sql=sql, dialect=dialect, allowed_tables=allowed)


def refused(sql: str, *, dialect: str = "postgres", allowed: frozenset[str] = ACME_TABLES) -> InvalidInput:
    with pytest.raises(InvalidInput) as raised:
        gate(sql, dialect=dialect, allowed=allowed)
    assert raised.value.jsonrpc_code == -32602
    return raised.value


# Writes and DDL.


def test_it_refuses_an_insert():
    error = refused("INSERT INTO orders (id) VALUES (1)")
    assert (error.message, error.data) == (SQL_NOT_SELECT, {"reason": "not_select", "statement": "Insert"})


def test_it_refuses_an_update():
    assert refused("UPDATE orders SET status = 'x'").message == SQL_NOT_SELECT


def test_it_refuses_a_delete():
    assert refused("DELETE FROM orders").message == SQL_NOT_SELECT


def test_it_refuses_a_delete_hidden_in_a_cte():
    error = refused("WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone")
    assert error.message == SQL_WRITES


def test_it_refuses_ddl():
    assert refused("DROP TABLE orders").message == SQL_NOT_SELECT
    assert refused("CREATE TABLE stolen AS SELECT * FROM customers").message == SQL_NOT_SELECT
    assert refused("ALTER TABLE orders ADD COLUMN x int").message == SQL_NOT_SELECT
    assert refused("TRUNCATE orders").message == SQL_NOT_SELECT


def test_it_refuses_select_into():
    assert refused("SELECT * INTO stolen FROM customers").message == SQL_LOCKS


def test_it_refuses_for_update():
    assert refused("SELECT * FROM orders FOR UPDATE").message == SQL_LOCKS
    assert refused("SELECT * FROM orders FOR SHARE").message == SQL_LOCKS


def test_it_refuses_session_and_copy_statements():
    for sql in ("SET statement_timeout = 0", "COPY orders TO '/tmp/x'", "BEGIN", "GRANT ALL ON orders TO x"):
        refused(sql)


def test_it_refuses_sqlite_attach_and_pragma():
    refused("ATTACH DATABASE '/tmp/other.db' AS other", dialect="sqlite")
    refused("PRAGMA writable_schema = ON", dialect="sqlite")


# Several statements.


def test_it_refuses_two_statements():
    error = refused("SELECT * FROM orders; DROP TABLE orders")
    assert (error.message, error.data) == (
        SQL_NOT_ONE_STATEMENT,
        {"reason": "statement_count", "statements": 2},
    )


def test_it_refuses_two_selects():
    assert refused("SELECT 1; SELECT 2").message == SQL_NOT_ONE_STATEMENT


def test_it_refuses_an_empty_query():
    assert refused("  -- nothing\n").message in {SQL_NOT_ONE_STATEMENT, SQL_UNPARSABLE}


def test_it_refuses_what_it_cannot_parse():
    assert refused("SELECT FROM WHERE (((").message == SQL_UNPARSABLE


# Functions with side effects, or unknown ones.


@pytest.mark.parametrize(
    "call",
    [
        "pg_sleep(10)",
        "pg_read_file('/etc/passwd')",
        "set_config('statement_timeout', '0', false)",
        "nextval('orders_id_seq')",
        "lo_import('/etc/passwd')",
        "lo_export(1, '/tmp/x')",
        "current_setting('data_directory')",
        "version()",
        "pg_terminate_backend(1)",
        "generate_series(1, 1000000000)",
        "txid_current()",
        "some_function_nobody_knows(1)",
    ],
)
def test_it_refuses_functions_outside_the_allowlist(call):
    error = refused(f"SELECT {call} FROM orders")  # noqa: S608 (an attack, built on purpose)
    assert error.message == SQL_FUNCTION
    assert error.data is not None
    assert error.data["reason"] == "function"


def test_it_refuses_dblink_as_a_table_function():
    error = refused("SELECT * FROM dblink('host=evil', 'SELECT 1') AS t(a int)")
    assert error.message in {SQL_FUNCTION, SQL_TABLE_FUNCTION}


def test_it_refuses_a_table_function_in_from():
    assert refused("SELECT * FROM generate_series(1, 10)").message in {SQL_FUNCTION, SQL_TABLE_FUNCTION}


def test_it_refuses_sqlite_load_extension():
    error = refused("SELECT load_extension('/tmp/evil.so')", dialect="sqlite")
    assert (error.message, error.data) == (SQL_FUNCTION, {"reason": "function", "function": "load_extension"})


def test_it_refuses_a_function_hidden_in_a_where_clause():
    assert refused("SELECT id FROM orders WHERE pg_sleep(5) IS NOT NULL").message == SQL_FUNCTION


def test_it_refuses_a_schema_qualified_function_even_with_an_allowed_name():
    assert refused("SELECT public.age(order_date) FROM orders").message == SQL_FUNCTION
    assert refused("SELECT pg_catalog.pg_sleep(1)").message == SQL_FUNCTION


def test_it_refuses_casts_that_read_the_catalog():
    assert refused("SELECT 'pg_authid'::regclass").message == SQL_TYPE
    assert refused("SELECT CAST(1 AS oid)").message == SQL_TYPE


# Other schemas, system catalogs, another tenant's tables.


@pytest.mark.parametrize(
    "table",
    ["pg_catalog.pg_authid", "pg_user", "pg_shadow", "information_schema.tables", "pg_catalog.pg_class"],
)
def test_it_refuses_postgres_system_catalogs(table):
    assert refused(f"SELECT * FROM {table}").message == SQL_SYSTEM_CATALOG  # noqa: S608


@pytest.mark.parametrize("table", ["sqlite_master", "sqlite_schema", "main.sqlite_master"])
def test_it_refuses_sqlite_system_tables(table):
    assert refused(f"SELECT * FROM {table}", dialect="sqlite").message == SQL_SYSTEM_CATALOG  # noqa: S608


def test_it_refuses_a_table_outside_the_ontology():
    error = refused("SELECT * FROM payroll")
    assert (error.message, error.data) == (SQL_UNKNOWN_TABLE, {"reason": "unknown_table", "table": "payroll"})


def test_it_refuses_another_tenants_tables():
    globex = frozenset({"shipments", "invoices"})
    assert refused("SELECT * FROM shipments", allowed=ACME_TABLES).message == SQL_UNKNOWN_TABLE
    assert refused("SELECT * FROM orders", allowed=globex).message == SQL_UNKNOWN_TABLE


def test_it_refuses_an_allowed_name_in_another_schema():
    assert refused("SELECT * FROM globex.orders").message == SQL_UNKNOWN_TABLE
    assert refused("SELECT * FROM otherdb.public.orders").message == SQL_UNKNOWN_TABLE


def test_it_refuses_a_quoted_name_that_is_a_different_table():
    assert refused('SELECT * FROM "ORDERS"').message == SQL_UNKNOWN_TABLE


def test_it_refuses_a_cte_that_pretends_to_be_a_table_it_reads():
    # In a non-recursive CTE its own name means the real table, which is not allowed.
    assert (
        refused("WITH payroll AS (SELECT * FROM payroll) SELECT * FROM payroll").message == SQL_UNKNOWN_TABLE
    )


def test_it_refuses_a_table_named_like_a_cte_outside_its_scope():
    sql = "SELECT * FROM (WITH payroll AS (SELECT 1) SELECT * FROM payroll) AS x, payroll"
    assert refused(sql).message == SQL_UNKNOWN_TABLE


def test_it_refuses_a_forbidden_table_in_a_subquery():
    assert refused("SELECT * FROM orders WHERE id IN (SELECT id FROM payroll)").message == SQL_UNKNOWN_TABLE


# Comment tricks.


def test_comments_are_dropped_from_the_sql_that_runs():
    gated = gate("SELECT id /* ; DROP TABLE orders */ FROM orders -- ; DELETE FROM orders")
    assert gated.sql == "SELECT id FROM orders"


def test_a_statement_hidden_behind_a_comment_is_still_a_second_statement():
    assert refused("SELECT 1 /* hi */; DROP TABLE orders -- bye").message == SQL_NOT_ONE_STATEMENT


def test_a_comment_cannot_split_a_forbidden_function_name():
    refused("SELECT pg_/**/sleep(10)")


def test_a_nested_comment_runs_as_the_tree_the_gate_checked():
    # PostgreSQL nests comments, so all of this is one comment after SELECT 1. Whatever any parser
    # makes of it, the SQL that runs is the one rendered from the tree the gate checked.
    assert gate("SELECT 1 /* outer /* inner */ ; DROP TABLE orders; */").sql == "SELECT 1"


# Very long queries.


def test_it_refuses_a_query_longer_than_the_limit_before_parsing():
    sql = "SELECT 1" + " " * SQL_MAX_CHARS
    error = refused(sql)
    assert (error.message, error.data) == (SQL_TOO_LONG, {"reason": "too_long", "maxChars": SQL_MAX_CHARS})


def test_it_accepts_a_long_query_under_the_limit():
    sql = "SELECT id FROM orders WHERE id IN (" + ", ".join(str(i) for i in range(2000)) + ")"  # noqa: S608
    assert len(sql) < SQL_MAX_CHARS
    assert gate(sql).tables == ("orders",)


# What it lets through.


def test_it_accepts_a_join_and_renders_the_sql_from_the_tree():
    gated = gate("select o.id, c.name from orders o join customers c on c.id = o.customer_id")
    assert gated.sql == "SELECT o.id, c.name FROM orders AS o JOIN customers AS c ON c.id = o.customer_id"
    assert gated.tables == ("orders", "customers")


def test_it_accepts_ctes_that_read_allowed_tables():
    gated = gate(
        "WITH big AS (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id),"
        " named AS (SELECT b.n, c.name FROM big b JOIN customers c ON c.id = b.customer_id)"
        " SELECT * FROM named"
    )
    assert gated.tables == ("orders", "customers")


def test_it_accepts_aggregates_windows_and_conditionals():
    gate(
        "SELECT region_id, count(*), sum(id), avg(id), min(name), max(name),"
        " row_number() OVER (ORDER BY region_id), CASE WHEN count(*) > 1 THEN 'many' ELSE 'one' END,"
        " coalesce(max(email), ''), round(avg(id)::numeric, 2), upper(max(segment))"
        " FROM customers GROUP BY region_id HAVING count(*) > 1"
    )


def test_it_accepts_date_filters_and_date_functions():
    gate(
        "SELECT date_trunc('month', order_date) AS month, count(*) FROM orders"
        " WHERE order_date >= DATE '2025-01-01' AND order_date < '2025-04-01'"
        " AND extract(year FROM order_date) = 2025 GROUP BY 1 ORDER BY 1"
    )


def test_it_accepts_exists_in_and_any_subqueries():
    gate(
        "SELECT * FROM orders o WHERE EXISTS (SELECT 1 FROM customers c WHERE c.id = o.customer_id)"
        " AND o.id = ANY(ARRAY[1, 2]) AND o.customer_id IN (SELECT id FROM customers)"
    )


def test_it_accepts_sqlite_date_functions():
    gate(
        "SELECT strftime('%Y-%m', order_date), date(order_date, '+1 day'), count(*) FROM orders"
        " WHERE order_date BETWEEN '2025-01-01' AND '2025-12-31' GROUP BY 1, 2",
        dialect="sqlite",
    )


def test_it_accepts_union_and_subqueries():
    gated = gate("SELECT id FROM orders WHERE customer_id IN (SELECT id FROM customers) UNION SELECT 1")
    assert gated.tables == ("orders", "customers")


def test_it_accepts_schema_qualified_default_schema_names():
    assert gate("SELECT * FROM public.orders").tables == ("orders",)
    assert gate("SELECT * FROM main.orders", dialect="sqlite").tables == ("orders",)


def test_sqlite_table_names_are_case_insensitive():
    assert gate("SELECT * FROM Orders", dialect="sqlite").tables == ("orders",)


def test_it_accepts_a_trailing_semicolon():
    assert gate("SELECT 1 FROM orders;").sql == "SELECT 1 FROM orders"


# Lineage read off the gated query.


def test_lineage_names_datasets_joins_filters_time_window_and_grain():
    gated = gate(
        "SELECT r.name, date_trunc('month', o.order_date), sum(l.quantity)"
        " FROM orders o JOIN customers c ON c.id = o.customer_id"
        " JOIN regions r ON r.id = c.region_id LEFT JOIN order_lines l ON l.order_id = o.id"
        " WHERE o.order_date >= '2025-01-01' AND o.order_date < DATE '2025-04-01' AND o.status = 'shipped'"
        " GROUP BY 1, 2"
    )
    lineage = lineage_from_query(gated, datasets_by_table=DATASETS)
    assert lineage["_type"] == "data_lineage"
    assert [d["name"] for d in lineage["datasets"]] == ["Orders", "Customers", "Regions", "Order lines"]
    assert [(j["kind"], j["dataset"], j["on"]) for j in lineage["joins"]] == [
        ("INNER", "Customers", "c.id = o.customer_id"),
        ("INNER", "Regions", "r.id = c.region_id"),
        ("LEFT", "Order lines", "l.order_id = o.id"),
    ]
    assert lineage["filters"] == [
        "o.order_date >= '2025-01-01'",
        "o.order_date < CAST('2025-04-01' AS DATE)",
        "o.status = 'shipped'",
    ]
    assert lineage["timeWindow"] == {"column": "o.order_date", "from": "2025-01-01", "to": "2025-04-01"}
    assert lineage["grain"] == {"level": "group", "by": ["r.name", "DATE_TRUNC('MONTH', o.order_date)"]}


def test_lineage_of_a_plain_select_has_row_grain_and_no_window():
    lineage = lineage_from_query(gate("SELECT id FROM orders"), datasets_by_table=DATASETS)
    assert (lineage["timeWindow"], lineage["grain"], lineage["joins"]) == (
        None,
        {"level": "row", "by": []},
        [],
    )


def test_lineage_of_a_between_filter_and_a_total():
    lineage = lineage_from_query(
        gate("SELECT count(*) FROM orders WHERE '2024-12-31' >= order_date AND order_date >= '2024-01-01'"),
        datasets_by_table=DATASETS,
    )
    assert lineage["timeWindow"] == {"column": "order_date", "from": "2024-01-01", "to": "2024-12-31"}
    assert lineage["grain"] == {"level": "total", "by": []}

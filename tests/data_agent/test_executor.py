"""The executor is the second line of defence: these call it directly, bypassing the gate, to show
that even SQL the gate would refuse cannot write, run long or return unbounded rows."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from decimal import Decimal

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from core.db import psycopg_connect_kwargs
from core.errors import InvalidInput, Timeout, Unavailable
from data_agent.executor import (
    QUERY_CANCELLED,
    QUERY_READ_ONLY,
    QUERY_TIMED_OUT,
    SOURCE_UNAVAILABLE,
    QueryCancel,
    json_safe,
    query_execute,
)
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def pg_url():
    """A scratch PostgreSQL database of its own, with one small table."""
    kwargs = psycopg_connect_kwargs()
    name = f"test_{kwargs['dbname']}_exec"
    admin = {**kwargs, "dbname": "postgres", "autocommit": True}
    with psycopg.connect(**admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(
        "", **{k: v for k, v in kwargs.items() if k not in {"autocommit", "dbname"}}, dbname=name
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY, price numeric(10, 2), sold date)")
        conn.execute("INSERT INTO items VALUES (1, 1.50, '2024-01-02'), (2, 2.25, '2024-02-03')")
        conn.execute("CREATE SEQUENCE counter")
    yield url
    with psycopg.connect(**admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _pg_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM items").fetchone()
        assert row is not None
        return int(row[0])


def _sleeping(url: str) -> bool:
    """Whether a query of the database at ``url`` is inside ``pg_sleep`` now."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'"
        ).fetchone()
        return found is not None


@pytest.fixture
def sqlite_url(tmp_path):
    path = tmp_path / "source.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, price NUMERIC, sold DATE)")
    conn.execute("INSERT INTO items VALUES (1, 1.5, '2024-01-02'), (2, 2.25, '2024-02-03')")
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


def test_it_returns_columns_and_json_safe_rows_from_postgres(pg_url):
    result = query_execute(url=pg_url, kind="postgres", sql="SELECT id, price, sold FROM items ORDER BY id")
    assert result.columns == ["id", "price", "sold"]
    assert result.rows == [[1, 1.5, "2024-01-02"], [2, 2.25, "2024-02-03"]]
    assert (result.row_count, result.truncated) == (2, False)


def test_an_array_or_json_column_arrives_as_its_json_text_so_every_cell_is_a_scalar(pg_url):
    sql = """SELECT ARRAY[1, 2] AS ids, '{"a": [true, null]}'::jsonb AS doc, 'x' AS plain"""
    result = query_execute(url=pg_url, kind="postgres", sql=sql)
    assert result.rows == [["[1,2]", '{"a":[true,null]}', "x"]]


def test_a_float_json_cannot_carry_is_named_in_words(pg_url):
    sql = "SELECT 'NaN'::float8, 'Infinity'::float8, '-Infinity'::float8, 1.5::float8"
    result = query_execute(url=pg_url, kind="postgres", sql=sql)
    assert result.rows == [["NaN", "Infinity", "-Infinity", 1.5]]


def test_it_keeps_a_percent_sign_in_the_sql_as_it_is(pg_url):
    result = query_execute(url=pg_url, kind="postgres", sql="SELECT '100%' AS share")
    assert result.rows == [["100%"]]


def test_an_insert_fails_on_postgres_even_past_the_gate(pg_url):
    with pytest.raises(InvalidInput):
        query_execute(url=pg_url, kind="postgres", sql="INSERT INTO items VALUES (3, 1, '2024-03-03')")
    assert _pg_count(pg_url) == 2


def test_a_data_modifying_cte_fails_on_postgres_even_past_the_gate(pg_url):
    with pytest.raises(InvalidInput):
        query_execute(
            url=pg_url, kind="postgres", sql="WITH gone AS (DELETE FROM items RETURNING *) SELECT * FROM gone"
        )
    assert _pg_count(pg_url) == 2


def test_a_side_effect_in_a_select_is_refused_by_the_read_only_transaction(pg_url):
    with pytest.raises(InvalidInput) as raised:
        query_execute(url=pg_url, kind="postgres", sql="SELECT nextval('counter')")
    assert raised.value.message == QUERY_READ_ONLY


def test_10001_rows_come_back_as_10000_flagged_truncated_on_postgres(pg_url):
    result = query_execute(url=pg_url, kind="postgres", sql="SELECT generate_series(1, 10001) AS n")
    assert (result.row_count, len(result.rows), result.truncated) == (10_000, 10_000, True)
    assert result.rows[-1] == [10_000]


def test_exactly_10000_rows_are_not_flagged(pg_url):
    result = query_execute(url=pg_url, kind="postgres", sql="SELECT generate_series(1, 10000) AS n")
    assert (result.row_count, result.truncated) == (10_000, False)


def test_a_slow_query_is_cancelled_at_the_timeout_on_postgres(pg_url):
    with pytest.raises(Timeout) as raised:
        query_execute(url=pg_url, kind="postgres", sql="SELECT pg_sleep(2)", timeout_seconds=1)
    assert raised.value.message == QUERY_TIMED_OUT
    assert raised.value.jsonrpc_code == -32004


def test_an_unreachable_host_is_unavailable_and_never_shows_the_password(caplog):
    url = "postgresql://someone:s3cret-pw@127.0.0.1:1/nothing"
    with caplog.at_level(logging.DEBUG), pytest.raises(Unavailable) as raised:
        query_execute(url=url, kind="postgres", sql="SELECT 1")
    assert raised.value.message == SOURCE_UNAVAILABLE
    assert raised.value.jsonrpc_code == -32005
    assert "s3cret-pw" not in str(raised.value)
    assert "s3cret-pw" not in repr(raised.value.data)
    assert "s3cret-pw" not in caplog.text
    assert raised.value.__cause__ is None  # the driver's message (host, user) is not chained either


def test_a_cancelled_query_stops_in_the_database_long_before_its_timeout(pg_url):
    cancel = QueryCancel()
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            query_execute(
                url=pg_url, kind="postgres", sql="SELECT pg_sleep(60)", timeout_seconds=60, cancel=cancel
            )
        except Timeout as error:
            outcome["error"] = error

    started = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: _sleeping(pg_url), within=30, what="the query running in the database")
    cancel.cancel()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert time.monotonic() - started < 30  # generous: the query would have run for 60 s
    assert outcome["error"].args[0] == QUERY_CANCELLED


def test_a_query_cancelled_before_it_starts_never_runs(pg_url):
    cancel = QueryCancel()
    cancel.cancel()
    with pytest.raises(Timeout) as raised:
        query_execute(url=pg_url, kind="postgres", sql="SELECT pg_sleep(60)", cancel=cancel)
    assert raised.value.message == QUERY_CANCELLED


def test_it_returns_rows_from_sqlite(sqlite_url):
    result = query_execute(url=sqlite_url, kind="sqlite", sql="SELECT id, sold FROM items ORDER BY id")
    assert result.rows == [[1, "2024-01-02"], [2, "2024-02-03"]]


def test_an_insert_fails_on_sqlite_even_past_the_gate(sqlite_url):
    with pytest.raises(InvalidInput) as raised:
        query_execute(url=sqlite_url, kind="sqlite", sql="INSERT INTO items VALUES (3, 1, '2024-03-03')")
    assert raised.value.message == QUERY_READ_ONLY
    assert query_execute(url=sqlite_url, kind="sqlite", sql="SELECT count(*) FROM items").rows == [[2]]


def test_10001_rows_come_back_as_10000_flagged_truncated_on_sqlite(sqlite_url):
    query = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10001) SELECT i FROM n"
    result = query_execute(url=sqlite_url, kind="sqlite", sql=query)
    assert (result.row_count, result.truncated) == (10_000, True)


def test_a_slow_query_is_cancelled_at_the_timeout_on_sqlite(sqlite_url):
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    with pytest.raises(Timeout):
        query_execute(url=sqlite_url, kind="sqlite", sql=endless, timeout_seconds=0.3)


def test_a_missing_sqlite_file_is_unavailable(tmp_path):
    with pytest.raises(Unavailable):
        query_execute(url=f"sqlite:///{tmp_path}/absent.sqlite3", kind="sqlite", sql="SELECT 1")


def test_values_are_made_json_safe():
    assert json_safe(Decimal("1.10")) == 1.1
    assert json_safe(Decimal("12345678901234567890.123")) == "12345678901234567890.123"
    assert json_safe(b"\x01\xff") == "01ff"

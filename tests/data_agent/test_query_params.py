"""Named parameters of a gated query are bound by the driver, never pasted into the SQL: hostile
values come back as the values they are, and a placeholder without a value (or a value without a
placeholder) is a clear -32602."""

from __future__ import annotations

import datetime
import sqlite3

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from core.db import psycopg_connect_kwargs
from core.errors import InvalidInput
from data_agent.query_run import query_gate_and_run
from data_agent.sql_gate import sql_gate_check
from data_agent.sql_parameters import sql_parameters_bind

TABLES = frozenset({"items"})
HOSTILE = [
    "'; DROP TABLE items; --",
    "Robert'); DROP TABLE items;--",
    "%(x)s %s %% :x $1 ?",
    "x" * 60_000,
    "ünïcödé ✓ 🚀",
]


@pytest.fixture(scope="module")
def pg_url():
    kwargs = psycopg_connect_kwargs()
    name = f"test_{kwargs['dbname']}_params"
    admin = {**kwargs, "dbname": "postgres", "autocommit": True}
    with psycopg.connect(**admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(
        "", **{k: v for k, v in kwargs.items() if k not in {"autocommit", "dbname"}}, dbname=name
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE items (id integer PRIMARY KEY, name text, price numeric(10, 2), sold date)"
        )
        conn.execute(
            "INSERT INTO items VALUES (1, 'Anvil', 1.50, '2024-01-02'), (2, 'Apple', 2.25, '2024-02-03'),"
            " (3, 'Boulder', 9.00, '2024-03-04'), (4, '100%', 4.00, '2024-04-05')"
        )
    yield url
    with psycopg.connect(**admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def sqlite_url(tmp_path):
    path = tmp_path / "source.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price NUMERIC, sold DATE)")
    conn.execute(
        "INSERT INTO items VALUES (1, 'Anvil', 1.5, '2024-01-02'), (2, 'Apple', 2.25, '2024-02-03'),"
        " (3, 'Boulder', 9.0, '2024-03-04'), (4, '100%', 4.0, '2024-04-05')"
    )
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


@pytest.fixture(params=["postgres", "sqlite"])
def source(request):
    kind = request.param
    url = request.getfixturevalue("pg_url" if kind == "postgres" else "sqlite_url")
    return kind, url


def run(source, query, params=None):
    kind, url = source
    return query_gate_and_run(
        sql=query,
        kind=kind,
        url=url,
        allowed_tables=TABLES,
        datasets_by_table={"items": "Items"},
        params=params,
    )


def count(source) -> int:
    return run(source, "SELECT COUNT(*) AS n FROM items").result.rows[0][0]


def test_values_are_bound_to_named_placeholders(source):
    run_ = run(
        source,
        "SELECT id FROM items WHERE name = :name AND price >= :low ORDER BY id",
        {"name": "Apple", "low": 1},
    )
    assert run_.result.rows == [[2]]


def test_a_literal_percent_beside_a_placeholder_still_works(source):
    query = "SELECT id FROM items WHERE name LIKE 'A%' AND id >= :low AND name <> '%(low)s' ORDER BY id"
    assert run(source, query, {"low": 2}).result.rows == [[2]]
    assert run(source, "SELECT id FROM items WHERE name = '100%' AND id = :id", {"id": 4}).result.rows == [
        [4]
    ]


def test_a_placeholder_used_twice_takes_one_value(source):
    query = "SELECT id FROM items WHERE id = :n OR price = :n ORDER BY id"
    assert run(source, query, {"n": 3}).result.rows == [[3]]


def test_dates_compare_as_dates_on_both_dialects(source):
    query = "SELECT id FROM items WHERE sold >= :since AND sold <= :until ORDER BY id"
    result = run(
        source, query, {"since": datetime.date(2024, 2, 1), "until": datetime.date(2024, 3, 31)}
    ).result
    assert result.rows == [[2], [3]]


def test_integer_limit_and_null_and_boolean_values(source):
    assert run(source, "SELECT id FROM items ORDER BY id LIMIT :n", {"n": 2}).result.rows == [[1], [2]]
    assert run(source, "SELECT :v AS v", {"v": None}).result.rows == [[None]]
    assert run(
        source, "SELECT id FROM items WHERE :flag ORDER BY id LIMIT 1", {"flag": True}
    ).result.rows == [[1]]


@pytest.mark.parametrize("value", HOSTILE, ids=["drop", "bobby", "markers", "huge", "unicode"])
def test_hostile_values_are_bound_as_values(source, value):
    assert run(source, "SELECT id FROM items WHERE name = :name", {"name": value}).result.rows == []
    echoed = run(source, "SELECT :v AS v", {"v": value}).result.rows
    assert echoed == [[value]]
    assert count(source) == 4


def test_a_nul_is_bound_on_sqlite_and_refused_plainly_on_postgres(source):
    kind, _ = source
    if kind == "sqlite":
        assert run(source, "SELECT :v AS v", {"v": "a\x00b"}).result.rows == [["a\x00b"]]
        return
    with pytest.raises(InvalidInput) as caught:
        run(source, "SELECT :v AS v", {"v": "a\x00b"})
    assert caught.value.data == {"reason": "parameter_text", "name": "v"}
    assert "NUL" in caught.value.message


def test_a_lone_surrogate_or_a_string_too_long_is_refused(source):
    for value in ("a\ud800b", "x" * 100_001):
        with pytest.raises(InvalidInput) as caught:
            run(source, "SELECT :v AS v", {"v": value})
        assert caught.value.data == {"reason": "parameter_text", "name": "v"}


def test_a_placeholder_without_a_value_is_named(source):
    with pytest.raises(InvalidInput) as caught:
        run(source, "SELECT id FROM items WHERE name = :name AND id = :id", {"name": "Anvil"})
    assert caught.value.data == {"reason": "parameter_missing", "parameters": ["id"]}
    assert "id" in caught.value.message


def test_a_value_without_a_placeholder_is_named(source):
    with pytest.raises(InvalidInput) as caught:
        run(source, "SELECT id FROM items", {"extra": 1})
    assert caught.value.data == {"reason": "parameter_unused", "parameters": ["extra"]}


def test_positional_placeholders_are_refused_when_binding(source):
    with pytest.raises(InvalidInput) as caught:
        run(source, "SELECT id FROM items WHERE id = ?", {"x": 1})
    assert caught.value.data == {"reason": "parameter_unnamed"}


@pytest.mark.parametrize("value", [object(), [1, 2], {"a": 1}, float("nan"), b"bytes"])
def test_a_value_of_another_type_is_refused(source, value):
    with pytest.raises(InvalidInput) as caught:
        run(source, "SELECT :v AS v", {"v": value})
    assert caught.value.data == {"reason": "parameter_type", "name": "v"}


def test_without_params_the_query_runs_exactly_as_before(source):
    # run_query sends no params: a literal % needs no escaping and the text goes unchanged.
    assert run(source, "SELECT id FROM items WHERE name LIKE 'A%' ORDER BY id").result.rows == [[1], [2]]


def test_the_postgres_text_doubles_only_literal_percents():
    gated = sql_gate_check(
        sql="SELECT id FROM items WHERE name LIKE '%a%' AND id = :id AND name <> 'gatehouse'",
        dialect="postgres",
        allowed_tables=TABLES,
    )
    text, values = sql_parameters_bind(gated=gated, params={"id": 1})
    assert text == "SELECT id FROM items WHERE name LIKE '%%a%%' AND id = %(id)s AND name <> 'gatehouse'"
    assert values == {"id": 1}
    # The SQL shown to the caller (and audited) stays the gate's, unescaped.
    assert gated.sql.endswith("id = %(id)s AND name <> 'gatehouse'")


def test_sqlite_dates_are_bound_as_iso_text():
    gated = sql_gate_check(
        sql="SELECT id FROM items WHERE sold = :d", dialect="sqlite", allowed_tables=TABLES
    )
    assert sql_parameters_bind(gated=gated, params={"d": datetime.date(2024, 1, 2)}) == (
        "SELECT id FROM items WHERE sold = :d",
        {"d": "2024-01-02"},
    )

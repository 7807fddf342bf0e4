"""Queries on a PostgreSQL data source reuse its idle connections, and each one still starts as it
did on a connection of its own: nothing one caller set is there for the next, every query runs
read-only under its own statement timeout, a changed URL never gets an old connection, and a
connection the server cut is replaced without failing the query."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from core.db import psycopg_connect_kwargs
from core.errors import InvalidInput, Timeout, Unavailable
from data_agent import source_connections
from data_agent.executor import QUERY_CANCELLED, QUERY_READ_ONLY, QueryCancel, query_execute
from data_agent.query_pool import QuerySource, query_run_fairly
from data_agent.query_slots import QueryCaller
from data_agent.source_connections import source_connection_give, source_connections_close

READER = "gatehouse_pool_test_reader"
PID = "SELECT pg_backend_pid()"
SLEEPING = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event = 'PgSleep'"


@pytest.fixture(scope="module")
def admin_url():
    kwargs = psycopg_connect_kwargs()
    return make_conninfo(
        "", **{k: v for k, v in kwargs.items() if k not in {"autocommit", "dbname"}}, dbname="postgres"
    )


@pytest.fixture(scope="module")
def pg_url(admin_url):
    """A scratch database with one table, and a second role that may read it."""
    name = f"test_{psycopg_connect_kwargs()['dbname']}_pool"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(READER)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(READER)))
    url = make_conninfo(admin_url, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY)")
        conn.execute("INSERT INTO items VALUES (1), (2)")
        conn.execute("CREATE SEQUENCE counter")
        conn.execute(sql.SQL("GRANT SELECT ON items TO {}").format(sql.Identifier(READER)))
    yield url
    source_connections_close(url=url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(READER)))


@pytest.fixture(autouse=True)
def fresh_pool(pg_url, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_AGENT_POOL_SIZE_PER_SOURCE": 4}
    source_connections_close(url=pg_url)
    yield
    source_connections_close(url=pg_url)


def _one(url: str, query: str, **kwargs) -> list:
    return query_execute(url=url, kind="postgres", sql=query, **kwargs).rows[0]


def _pid(url: str) -> int:
    return _one(url, PID)[0]


def _alive(admin_url: str, pid: int) -> bool:
    with psycopg.connect(admin_url) as conn:
        return conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone() is not None


def test_a_second_query_runs_on_the_first_one_s_connection(pg_url):
    assert _pid(pg_url) == _pid(pg_url)


def test_the_same_query_many_times_over_runs_on_one_connection(pg_url):
    # Past psycopg's threshold for preparing a statement, which the reset would have deallocated.
    answers = [_one(pg_url, "SELECT pg_backend_pid(), count(*) FROM items") for _ in range(8)]
    assert len({pid for pid, _ in answers}) == 1
    assert {count for _, count in answers} == {2}


def test_with_a_pool_size_of_zero_every_query_opens_a_connection_of_its_own(pg_url, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_AGENT_POOL_SIZE_PER_SOURCE": 0}
    assert _pid(pg_url) != _pid(pg_url)


def test_what_one_query_sets_in_its_session_is_gone_for_the_next(pg_url):
    first = _one(
        pg_url,
        "SELECT pg_backend_pid(), set_config('search_path', 'nowhere', false),"
        " set_config('application_name', 'leaked', false), pg_advisory_lock(42)",
    )
    pid, search_path, application_name, advisory_locks = _one(
        pg_url,
        "SELECT pg_backend_pid(), current_setting('search_path'), current_setting('application_name'),"
        " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())",
    )
    assert pid == first[0]  # the same connection, so the rest is a real check
    assert (search_path, application_name, advisory_locks) == ('"$user", public', "", 0)


async def test_one_tenant_s_query_leaves_nothing_for_another_tenant_s(pg_url):
    source = QuerySource(
        id=int(time.monotonic_ns() % 1_000_000_000),
        kind="postgres",
        url=pg_url,
        allowed_tables=frozenset({"items"}),
        datasets_by_table={"items": "Items"},
    )
    items = "SELECT id FROM items ORDER BY id"
    alice, zed = QueryCaller(tenant_id=1, user_id=10), QueryCaller(tenant_id=2, user_id=20)
    assert (await query_run_fairly(caller=alice, source=source, sql=items)).result.rows == [[1], [2]]
    # SQL the gate would refuse, straight to the executor: the worst a first caller could leave.
    pid = _one(
        pg_url, "SELECT pg_backend_pid(), set_config('search_path', 'nowhere', false), pg_advisory_lock(7)"
    )[0]
    # With search_path "nowhere", items would not be found.
    assert (await query_run_fairly(caller=zed, source=source, sql=items)).result.rows == [[1], [2]]
    # This connection's advisory locks only: another test run on the same cluster may hold its own.
    locks = (
        "SELECT pg_backend_pid(), "
        "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())"
    )
    assert _one(pg_url, locks) == [pid, 0]


def test_every_query_runs_read_only_under_its_own_timeout_on_a_reused_connection(pg_url):
    pid = _one(
        pg_url,
        "SELECT pg_backend_pid(), set_config('statement_timeout', '0', false),"
        " set_config('default_transaction_read_only', 'off', false)",
        timeout_seconds=1,
    )[0]
    assert _one(pg_url, "SELECT pg_backend_pid(), current_setting('statement_timeout')") == [pid, "30s"]
    with pytest.raises(InvalidInput) as refused:
        _one(pg_url, "SELECT nextval('counter')")
    assert refused.value.message == QUERY_READ_ONLY
    with pytest.raises(Timeout):
        _one(pg_url, "SELECT pg_sleep(3)", timeout_seconds=1)
    assert _pid(pg_url) == pid


def test_a_changed_password_or_user_never_gets_the_old_connection(pg_url):
    # Trust authentication here ignores the password, so only the URL tells the two apart.
    params = conninfo_to_dict(pg_url)
    old_password = make_conninfo("", **{**params, "password": "first"})
    new_password = make_conninfo("", **{**params, "password": "second"})
    reader = make_conninfo("", **{**params, "user": READER})
    try:
        before = _pid(old_password)
        assert _pid(old_password) == before
        assert _pid(new_password) != before
        assert _one(reader, "SELECT current_user")[0] == READER
        assert _one(old_password, "SELECT current_user")[0] != READER
    finally:
        for url in (old_password, new_password, reader):
            source_connections_close(url=url)


def test_a_connection_the_server_cut_is_replaced_without_failing_the_query(pg_url, admin_url):
    # Two idle connections, opened as the executor opens them, then both cut as a restart would.
    idle = [psycopg.connect(pg_url, autocommit=False) for _ in range(2)]
    pids = {conn.info.backend_pid for conn in idle}
    for conn in idle:
        source_connection_give(url=pg_url, conn=conn, reusable=True)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", [pid])
    assert _one(pg_url, "SELECT count(*) FROM items") == [2]
    assert _pid(pg_url) not in pids


def test_a_query_that_kills_its_own_connection_fails_and_the_next_gets_a_new_one(pg_url):
    pid = _pid(pg_url)
    with pytest.raises(Unavailable):
        _one(pg_url, "SELECT pg_terminate_backend(pg_backend_pid())")
    assert _pid(pg_url) != pid


def test_a_cancelled_query_s_connection_is_closed_not_reused(pg_url, admin_url):
    cancel = QueryCancel()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            _one(pg_url, "SELECT pg_sleep(60)", timeout_seconds=60, cancel=cancel)
        except Timeout as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    pid = None
    for _ in range(100):
        with psycopg.connect(admin_url) as conn:
            row = conn.execute(SLEEPING, [conninfo_to_dict(pg_url)["dbname"]]).fetchone()
        if row:
            pid = row[0]
            break
        time.sleep(0.05)
    cancel.cancel()
    thread.join(timeout=30)
    assert isinstance(outcome["error"], Timeout)
    assert outcome["error"].message == QUERY_CANCELLED
    assert pid is not None
    for _ in range(100):
        if not _alive(admin_url, pid):
            break
        time.sleep(0.05)
    assert not _alive(admin_url, pid)


def test_a_connection_idle_past_its_time_is_closed(pg_url, admin_url, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_AGENT_POOL_IDLE_SECONDS": 1}
    pid = _pid(pg_url)
    # The sweeper closes it with no other query coming (once its current sleep, up to a quarter of
    # the previous test's idle time, is over).
    for _ in range(300):
        if not _alive(admin_url, pid):
            break
        time.sleep(0.1)
    assert not _alive(admin_url, pid)
    assert not source_connections._idle.get(source_connections._key(pg_url))

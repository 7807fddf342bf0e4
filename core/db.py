"""Database access from the MCP endpoint, which runs outside Django's request cycle.

Two ways in:

* ``hot_path_fetchone``: the one query every MCP request makes (``tokens``). On PostgreSQL it runs
  on the event loop through psycopg's own async pool, with no hop to a worker thread and no
  ``SELECT 1`` health check in front of it; psycopg prepares it on each connection after a few
  uses. ``hot_path_execute``: a write whose result nobody reads, on the same pool. For both, a
  connection the server cut is swept out with its idle siblings and the statement retried once on
  a fresh one; a database still unreachable raises Django's ``OperationalError``, any other
  failure its ``DatabaseError``.
* ``hot_path_execute_raw``: the audit trail's writes, with PostgreSQL's own ``$1`` placeholders, on
  a connection of their own driven through libpq directly (``_WireConnection``), with the same
  retry and the same two errors.
* ``db_call``: everything else (opening and ending sessions, tools' own work), through Django on
  its database thread. MCP requests never fire Django's request signals, which is where stale or
  broken connections are normally dropped, so it does that first. Always the process's one
  database thread, also from an async Django view (the REST API): Django runs each of its
  requests in a thread-sensitive context of its own, whose new thread would open a new
  connection for every request (its cost is in docs/benchmarks.md), where this thread's stays open
  for ``DB_CONN_MAX_AGE``. The calls take turns by tenant (``core.db_turns``).

On SQLite (the embedded default) both go through Django.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import DatabaseError, OperationalError, close_old_connections, connection, connections

from core.conf import gatehouse_settings
from core.db_turns import db_turn
from core.querycount import querycount_add

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

POOL_TIMEOUT_SECONDS = 3.0


async def db_call(func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    def run() -> R:
        close_old_connections()
        return func(*args, **kwargs)

    # The thread runs one call at a time anyway: the turns decide whose is next (core.db_turns).
    async with db_turn():
        if SyncToAsync.thread_sensitive_context.get(None) is None:
            return await sync_to_async(run)()
        # Inside a Django request: leave its per-request thread (and its new connection) for ours.
        async with ThreadSensitiveContext(executor=SyncToAsync.single_thread_executor):
            return await sync_to_async(run)()


def psycopg_connect_kwargs() -> dict[str, Any]:
    """How to open a plain psycopg connection (autocommit) to Django's default database."""
    params = connections["default"].get_connection_params()
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    return {**params, "autocommit": True}


class _HotPathPool:
    def __init__(self) -> None:
        self._pool: Any = None
        self._lock = asyncio.Lock()
        self._counting = False

    async def fetchone(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        return await self._run(sql, params, fetch=True)

    async def execute(self, sql: str, params: Sequence[Any]) -> None:
        """A statement whose result nobody reads, in autocommit."""
        await self._run(sql, params, fetch=False)

    async def _run(self, sql: str, params: Sequence[Any], *, fetch: bool) -> tuple[Any, ...] | None:
        import psycopg
        import psycopg_pool

        pool = self._pool or await self._open()
        try:
            for attempt in (1, 2):
                try:
                    async with pool.connection() as conn:
                        if self._counting:
                            querycount_add()
                        async with conn.cursor() as cursor:
                            await cursor.execute(sql, params)
                            return await cursor.fetchone() if fetch else None
                except psycopg.OperationalError:
                    # A connection the server cut (restart, failover, an operator's kill): its
                    # idle siblings were likely cut too. Sweep them out, then one fresh try before
                    # calling the database unavailable. A write retried here may have committed
                    # before its connection died: the audit trail's inserts are idempotent.
                    if attempt == 2:
                        raise
                    logger.warning("Hot-path database connection lost; retrying on a fresh one")
                    await pool.check()
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as error:
            # Django's class for "the database is not there": callers tell it from a refused row.
            raise OperationalError(str(error)) from error
        except psycopg.Error as error:
            raise DatabaseError(str(error)) from error
        raise AssertionError("unreachable")

    async def _open(self) -> Any:
        from psycopg_pool import AsyncConnectionPool

        async with self._lock:
            if self._pool is None:
                options = settings.DATABASES["default"].get("OPTIONS", {})
                pool = AsyncConnectionPool(
                    kwargs={
                        **psycopg_connect_kwargs(),
                        # Behind a transaction-mode PgBouncer set OPTIONS prepare_threshold to None.
                        "prepare_threshold": options.get("prepare_threshold", 5),
                    },
                    min_size=1,
                    max_size=gatehouse_settings.MCP_DB_POOL_SIZE,
                    timeout=POOL_TIMEOUT_SECONDS,
                    open=False,
                    name="gatehouse-hot-path",
                )
                await pool.open(wait=False)
                self._counting = gatehouse_settings.GATEHOUSE_COUNT_QUERIES
                self._pool = pool
        return self._pool


_pool = _HotPathPool()


class _ConnectionLost(Exception):
    """The wire connection went (cut by the server, or never made): worth one fresh try."""


class _WireConnection:
    """The audit trail's INSERTs on one connection of their own, through libpq directly.

    One call at a time, each call's row a batch of its own: through psycopg's async cursor, a
    batch's round trip cost more of the process's CPU than the call it records (the pool's
    checkout, the cursor, a reader added to the loop and removed again for every wait, psycopg's
    dumpers for each value). Here the socket's reader stays on the loop for the connection's life,
    values go as text, and each statement is prepared on the connection the first time it is sent
    (unless ``OPTIONS prepare_threshold`` is None, as behind a transaction-mode PgBouncer).

    One statement is in flight at a time (the group commit sends one batch at a time anyway). A
    connection that is gone (cut while idle, or during the statement) is dropped and the statement
    tried once more on a fresh one: the audit INSERTs are idempotent. Still unreachable raises
    Django's ``OperationalError``; a statement the database refused, its ``DatabaseError``."""

    MAX_PREPARED = 64

    def __init__(self) -> None:
        self._conn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._answer: asyncio.Future[Any] | None = None
        self._prepared: dict[str, bytes] = {}
        self._prepares = True
        self._writing = False
        # Kept from the connection's start: libpq forgets its socket once the connection is lost,
        # and a reader left on the loop for a closed descriptor would catch the next socket given
        # the same number.
        self._socket = -1

    async def execute(self, sql: str, params: Sequence[Any]) -> None:
        values = [_wire_text(value) for value in params]
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._drop()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            for attempt in (1, 2):
                try:
                    await self._execute(sql, values)
                    return
                except _ConnectionLost as lost:
                    if attempt == 2:
                        raise OperationalError(str(lost)) from lost
                    logger.warning("Audit database connection lost; retrying on a fresh one")
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connection (the next statement opens another): for tests, whose database
        must be droppable after them."""
        self._drop()
        self._loop = self._lock = None

    async def _execute(self, sql: str, values: list[bytes | None]) -> None:
        import psycopg

        conn = self._conn or await self._connect()
        pgconn = conn.pgconn
        if gatehouse_settings.GATEHOUSE_COUNT_QUERIES:
            querycount_add()
        name = self._prepared.get(sql)
        try:
            if name is None and self._prepares and len(self._prepared) < self.MAX_PREPARED:
                name = f"gatehouse_{len(self._prepared)}".encode()
                pgconn.send_prepare(name, sql.encode())
                self._answer_check(await self._round_trip())
                self._prepared[sql] = name
            if name is None:
                pgconn.send_query_params(sql.encode(), values)
            else:
                pgconn.send_query_prepared(name, values)
        except psycopg.OperationalError as error:
            self._drop()
            raise _ConnectionLost(str(error)) from error
        self._answer_check(await self._round_trip())

    def _answer_check(self, result: Any) -> None:
        if _lost_state(result):
            # The server's farewell (an operator's kill, a restart): what comes next is its EOF.
            self._drop()
            raise _ConnectionLost(result.get_error_message())
        _refused_raise(result)

    async def _round_trip(self) -> Any:
        """Send what is queued and wait for its first result (the reader collects the rest)."""
        answer = self._answer = asyncio.get_running_loop().create_future()
        try:
            self._flush()
            return await answer
        except asyncio.CancelledError:
            # The answer would arrive for nobody and block the next statement: start afresh.
            self._drop()
            raise
        finally:
            self._answer = None

    def _flush(self) -> None:
        # A large batch may not fit in the socket's buffer: the rest goes when it has room.
        if self._conn is None or self._loop is None:
            return
        socket = self._socket
        try:
            waiting = self._conn.pgconn.flush()
        except Exception as error:
            self._lose(error)
            return
        if waiting and not self._writing:
            self._loop.add_writer(socket, self._flush)
        elif self._writing and not waiting:
            self._loop.remove_writer(socket)
        self._writing = bool(waiting)

    def _drain(self) -> None:
        if self._conn is None:
            return
        pgconn = self._conn.pgconn
        try:
            pgconn.consume_input()
            if pgconn.is_busy():
                return
            results = []
            while (result := pgconn.get_result()) is not None:
                results.append(result)
        except Exception as error:
            self._lose(error)
            return
        if not results:
            return
        # A deferred constraint fails at the implicit COMMIT, after the statement's own rows: the
        # answer is its first error, if it has one.
        answer = next((result for result in results if _failed(result)), results[0])
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(answer)
        elif _lost_state(answer):
            # Cut while idle: the next statement goes straight to a fresh connection.
            self._drop()

    def _lose(self, error: BaseException) -> None:
        answer = self._answer
        self._drop()
        if answer is not None and not answer.done():
            answer.set_exception(_ConnectionLost(str(error) or type(error).__name__))

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._prepared = {}
        self._writing = False
        if conn is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._socket)
            self._loop.remove_writer(self._socket)
        conn.pgconn.finish()

    async def _connect(self) -> Any:
        import psycopg

        options = settings.DATABASES["default"].get("OPTIONS", {})
        self._prepares = options.get("prepare_threshold", 5) is not None
        try:
            async with asyncio.timeout(POOL_TIMEOUT_SECONDS):
                conn = await psycopg.AsyncConnection.connect(**psycopg_connect_kwargs())
        except (psycopg.OperationalError, TimeoutError) as error:
            raise _ConnectionLost(str(error) or "connection timed out") from error
        assert self._loop is not None
        self._socket = conn.pgconn.socket
        self._loop.add_reader(self._socket, self._drain)
        self._conn = conn
        return conn


def _failed(result: Any) -> bool:
    from psycopg import pq

    return result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


def _lost_state(result: Any) -> bool:
    """Whether ``result`` says the connection itself is finished (class 08, or the server
    terminating it: 57P01-57P03), rather than refusing the statement."""
    from psycopg import pq

    if not _failed(result):
        return False
    state = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode("ascii", "replace")
    return state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _refused_raise(result: Any) -> None:
    import psycopg

    if not _failed(result):
        return
    error = psycopg.errors.error_from_result(result)
    if isinstance(error, psycopg.OperationalError):
        raise OperationalError(str(error)) from error
    raise DatabaseError(str(error)) from error


def _wire_text(value: Any) -> bytes | None:
    """A parameter as PostgreSQL's text form. libpq sends text parameters as C strings: a NUL (or
    a string that is not UTF-8) would be cut or refused there, so it is refused here, as a refused
    row (the audit store then stores it degraded)."""
    if value is None:
        return None
    # Most of an audit row's values are text: checked first.
    if type(value) is str:
        text = value
    elif isinstance(value, datetime.date):
        text = value.isoformat()
    elif isinstance(value, bool):
        text = "t" if value else "f"
    else:
        text = str(value)
    try:
        encoded = text.encode()
    except UnicodeEncodeError as error:
        raise DatabaseError(f"a parameter is not UTF-8: {error.reason}") from error
    if b"\x00" in encoded:
        raise DatabaseError("a parameter holds a NUL character")
    return encoded


wire_connection = _WireConnection()


@functools.cache
def _on_postgresql() -> bool:
    return connection.vendor == "postgresql"


async def hot_path_fetchone(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    if _on_postgresql():
        return await _pool.fetchone(sql, params)
    return await db_call(_fetchone_sync, sql, params)


async def hot_path_execute(sql: str, params: Sequence[Any]) -> None:
    """A write that rides the hot path: on PostgreSQL, the same async pool; on SQLite (where the
    audit trail writes through it), Django's connection."""
    if _on_postgresql():
        await _pool.execute(sql, params)
    else:
        await db_call(_execute_sync, sql, params)


def hot_path_raw() -> bool:
    """Whether ``hot_path_execute_raw`` serves here: on PostgreSQL, on the wire connection."""
    return _on_postgresql()


async def hot_path_execute_raw(sql: str, params: Sequence[Any]) -> None:
    """``hot_path_execute`` for a statement with PostgreSQL's own ``$1`` placeholders, sent as it
    is (psycopg parses a ``%s`` statement on every execution once it is longer than its cache
    takes, 4 kB) on the wire connection. PostgreSQL only (``hot_path_raw``)."""
    if not _on_postgresql():
        raise RuntimeError("Raw statements need PostgreSQL.")
    await wire_connection.execute(sql, params)


def _execute_sync(sql: str, params: Sequence[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _fetchone_sync(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()

"""Database access from the MCP endpoint, which runs outside Django's request cycle.

Two ways in:

* ``hot_path_fetchone``: the one query every MCP request makes (``tokens``). On PostgreSQL it runs
  on the event loop through psycopg's own async pool, with no hop to a worker thread and no
  ``SELECT 1`` health check in front of it; psycopg prepares it on each connection after a few
  uses. ``hot_path_execute``: the audit trail's writes, on the same pool. For both, a connection
  the server cut is swept out with its idle siblings and the statement retried once on a fresh
  one; a database still unreachable raises Django's ``OperationalError``, any other failure its
  ``DatabaseError``.
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

    async def execute(self, sql: str, params: Sequence[Any], *, raw: bool = False) -> None:
        """A statement whose result nobody reads (the audit trail's inserts), in autocommit;
        ``raw``: with ``$1`` placeholders, sent as it is (``hot_path_execute_raw``)."""
        await self._run(sql, params, fetch=False, raw=raw)

    async def _run(
        self, sql: str, params: Sequence[Any], *, fetch: bool, raw: bool = False
    ) -> tuple[Any, ...] | None:
        import psycopg
        import psycopg_pool

        pool = self._pool or await self._open()
        try:
            for attempt in (1, 2):
                try:
                    async with pool.connection() as conn:
                        if self._counting:
                            querycount_add()
                        cursor = psycopg.AsyncRawCursor(conn) if raw else conn.cursor()
                        async with cursor:
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


@functools.cache
def _on_postgresql() -> bool:
    return connection.vendor == "postgresql"


async def hot_path_fetchone(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    if _on_postgresql():
        return await _pool.fetchone(sql, params)
    return await db_call(_fetchone_sync, sql, params)


async def hot_path_execute(sql: str, params: Sequence[Any]) -> None:
    """Writes that ride the hot path (the audit trail): on PostgreSQL, the same async pool."""
    if _on_postgresql():
        await _pool.execute(sql, params)
    else:
        await db_call(_execute_sync, sql, params)


def hot_path_raw() -> bool:
    """Whether ``hot_path_execute_raw`` serves here: on PostgreSQL, through the async pool."""
    return _on_postgresql()


async def hot_path_execute_raw(sql: str, params: Sequence[Any]) -> None:
    """``hot_path_execute`` for a statement with PostgreSQL's own ``$1`` placeholders: psycopg
    sends it as it is, where a ``%s`` statement is parsed on every execution once it is longer
    than psycopg's cache takes (4 kB). PostgreSQL only (``hot_path_raw``)."""
    if not _on_postgresql():
        raise RuntimeError("Raw statements need PostgreSQL.")
    await _pool.execute(sql, params, raw=True)


def _execute_sync(sql: str, params: Sequence[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _fetchone_sync(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()

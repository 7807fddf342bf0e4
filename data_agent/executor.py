"""Runs a gated query against a tenant's data source: read-only, time-limited, row-limited.

These are the second line of defence: even SQL that slipped past the gate cannot write (a
read-only transaction, or SQLite opened ``mode=ro`` with ``query_only``), cannot run long (a
statement timeout, or a progress handler), and cannot return more than ``max_rows`` rows (a
server-side cursor fetches one row more, only to know it was truncated). Synchronous: tools run it
on their data source's own threads (``data_agent.query_pool``), which may stop it early through a
``QueryCancel`` when the caller has gone. PostgreSQL connections are kept between queries of the
same data source (``data_agent.source_connections``), reset to a new connection's state after each;
every query sets its read-only transaction and statement timeout again, as on a new connection.

Connection URLs carry passwords: no error message or log line here ever includes one, nor the
driver's own connection error text (which names hosts).
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Annotated, Any

import psycopg
import psycopg.errors
from pydantic import WithJsonSchema

from core.errors import InvalidInput, Timeout, Unavailable
from data_agent.introspection import sqlite_path
from data_agent.source_connections import (
    source_connection_give,
    source_connection_reuse,
    source_connections_close,
)

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_ROWS = 10_000
CONNECT_TIMEOUT_SECONDS = 5
# How many SQLite virtual-machine steps between two looks at the clock.
SQLITE_PROGRESS_STEPS = 10_000

QUERY_TIMED_OUT = "The query ran longer than its time limit and was cancelled."
QUERY_CANCELLED = "The query was cancelled: its caller stopped waiting for it."
SOURCE_UNAVAILABLE = "The data source is unreachable; try again shortly or ask an admin to check it."
QUERY_READ_ONLY = "The query tried to write; queries run in a read-only transaction."
QUERY_FAILED = "The database refused the query."

_CURSOR_NAME = "gatehouse_query"


class QueryCancel:
    """Lets another thread stop a query: a caller that gave up (a disconnect, a tool's timeout)
    should not keep a connection and a worker busy until the statement timeout.

    Safe in any order: cancelling before the query starts stops it as it starts, and after it ends
    does nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop: Callable[[], None] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """May block briefly (PostgreSQL's cancel request): call it off the event loop."""
        with self._lock:
            self.cancelled = True
            if self._stop is not None:
                try:
                    self._stop()
                except Exception as error:  # the query may have ended meanwhile; nothing to stop
                    logger.info("Query cancel request failed (%s)", type(error).__name__)

    def _attach(self, stop: Callable[[], None]) -> bool:
        """False when already cancelled: the query must not start."""
        with self._lock:
            self._stop = stop
            return not self.cancelled

    def _detach(self) -> None:
        # Under the lock, so a cancel never reaches a connection being closed.
        with self._lock:
            self._stop = None


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    row_count: int
    elapsed_ms: float


# A row's cell as tool output schemas publish it: a concrete type every common validator accepts.
# One `type` per branch: a `type` array is legal JSON Schema, but clients that map tool schemas onto
# a single-type dialect (the Inspector's --strict check warns of it) may reject or drop it.
CELL_JSON_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": kind} for kind in ("string", "number", "integer", "boolean", "null")]
}
Cell = Annotated[Any, WithJsonSchema(CELL_JSON_SCHEMA)]


def json_safe(value: Any) -> Any:
    """A value JSON can carry: exact decimals as floats when lossless, else as strings; times as ISO."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        as_float = float(value)
        return as_float if Decimal(repr(as_float)) == value else str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    return str(value)


def json_cell(value: Any) -> str | int | float | bool | None:
    """A cell as ``Cell`` publishes it: JSON-safe, and an array or a JSON document as its JSON text
    (a row is a list of scalars to every client, whatever the column's type). A float that JSON
    cannot carry (NaN, infinities) is named in words, as a numeric column's already is."""
    safe = json_safe(value)
    if isinstance(safe, list | dict):
        return json.dumps(safe, ensure_ascii=False, separators=(",", ":"))
    if isinstance(safe, float) and not math.isfinite(safe):
        return str(Decimal(safe))
    return safe


def query_execute(
    *,
    url: str,
    kind: str,
    sql: str,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    max_rows: int = DEFAULT_MAX_ROWS,
    cancel: QueryCancel | None = None,
    params: Mapping[str, Any] | None = None,
) -> QueryResult:
    """Run ``sql`` (already through the gate) and return at most ``max_rows`` rows, JSON-safe.

    ``params`` are bound by the driver to the named placeholders of ``sql`` (``%(name)s`` for
    PostgreSQL, every other ``%`` doubled; ``:name`` for SQLite): ``data_agent.sql_parameters``.

    Raises ``Timeout`` past ``timeout_seconds`` (or once ``cancel`` is cancelled), ``Unavailable``
    when the source cannot be reached and ``InvalidInput`` when the database refuses the query (a
    write, an unknown column...).
    """
    started = time.monotonic()
    cancel = cancel or QueryCancel()
    if kind == "postgres":
        columns, rows = _postgres(
            url=url, sql=sql, timeout_seconds=timeout_seconds, max_rows=max_rows, cancel=cancel, params=params
        )
    elif kind == "sqlite":
        columns, rows = _sqlite(
            url=url, sql=sql, timeout_seconds=timeout_seconds, max_rows=max_rows, cancel=cancel, params=params
        )
    else:
        raise ValueError(f"Unknown data source kind {kind!r}")
    truncated = len(rows) > max_rows
    rows = rows[:max_rows]
    return QueryResult(
        columns=columns,
        rows=[[json_cell(v) for v in row] for row in rows],
        truncated=truncated,
        row_count=len(rows),
        elapsed_ms=round((time.monotonic() - started) * 1000, 1),
    )


def _postgres(
    *,
    url: str,
    sql: str,
    timeout_seconds: float,
    max_rows: int,
    cancel: QueryCancel,
    params: Mapping[str, Any] | None = None,
) -> tuple[list[str], list[Any]]:
    try:
        # A second try only when an idle connection turned out dead before the query was sent.
        for attempt in (1, 2):
            conn = source_connection_reuse(url=url)
            reused = conn is not None
            conn = conn or _postgres_connect(url)
            stale = False
            try:
                if not cancel._attach(partial(conn.cancel_safe, timeout=CONNECT_TIMEOUT_SECONDS)):
                    raise Timeout(QUERY_CANCELLED, data={"reason": "cancelled"})
                # The transaction opens READ ONLY; set_config(..., true) is SET LOCAL with a bound value.
                conn.read_only = True
                try:
                    with conn.cursor() as setup:
                        setup.execute(
                            "SELECT set_config('statement_timeout', %s, true)",
                            (str(max(1, int(timeout_seconds * 1000))),),
                        )
                except psycopg.OperationalError:
                    if not reused or attempt == 2:
                        raise
                    stale = True
                    logger.info("An idle data source connection was cut; retrying on a new one")
                    continue
                # A named cursor is a server-side one (DECLARE ... CURSOR FOR), which also admits only
                # SELECT/VALUES; fetching max_rows + 1 tells a truncated result from a complete one.
                with conn.cursor(name=_CURSOR_NAME) as cursor:
                    # Without params, the text goes as it is (no placeholder parsing), as it always has.
                    if params is None:
                        cursor.execute(sql)
                    else:
                        cursor.execute(sql, dict(params))
                    rows = cursor.fetchmany(max_rows + 1)
                    columns = [d.name for d in cursor.description or ()]
                return columns, rows
            finally:
                cancel._detach()
                # Rolled back and reset before the next query may have it (data_agent.source_connections);
                # after a cancel request, closed: a late one would reach the next caller's statement.
                source_connection_give(url=url, conn=conn, reusable=not (stale or cancel.cancelled))
                if stale:
                    # The server likely cut the source's other idle connections too (a restart).
                    source_connections_close(url=url)
        raise AssertionError("unreachable")
    except psycopg.errors.QueryCanceled:
        if cancel.cancelled:
            raise Timeout(QUERY_CANCELLED, data={"reason": "cancelled"}) from None
        raise Timeout(QUERY_TIMED_OUT, data={"timeoutSeconds": timeout_seconds}) from None
    except psycopg.errors.ReadOnlySqlTransaction:
        raise InvalidInput(QUERY_READ_ONLY, data={"reason": "read_only"}) from None
    except psycopg.OperationalError:
        logger.warning("Data source connection lost during a query")
        raise Unavailable(SOURCE_UNAVAILABLE) from None
    except psycopg.Error as error:
        # Syntax and semantic errors (unknown column, bad cast): the server's primary message
        # helps a client fix its SQL and carries no credentials.
        detail = error.diag.message_primary if error.diag else None
        raise InvalidInput(QUERY_FAILED, data={"reason": "database", "detail": detail}) from None


def _postgres_connect(url: str) -> psycopg.Connection[Any]:
    try:
        # Nothing prepared: no statement outlives its query on a connection the next caller reuses.
        return psycopg.connect(
            url, connect_timeout=CONNECT_TIMEOUT_SECONDS, autocommit=False, prepare_threshold=None
        )
    except psycopg.Error as error:
        # The driver's message names the host and sometimes the user; only the class is logged.
        logger.warning("Data source connection failed (%s)", type(error).__name__)
        raise Unavailable(SOURCE_UNAVAILABLE) from None


def _sqlite(
    *,
    url: str,
    sql: str,
    timeout_seconds: float,
    max_rows: int,
    cancel: QueryCancel,
    params: Mapping[str, Any] | None = None,
) -> tuple[list[str], list[Any]]:
    try:
        path = sqlite_path(url=url)
        # mode=ro: SQLite refuses every write on this handle, whatever the SQL says.
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=CONNECT_TIMEOUT_SECONDS)
        conn.execute("PRAGMA query_only = ON")
    except (ValueError, sqlite3.Error) as error:
        logger.warning("Data source could not be opened (%s)", type(error).__name__)
        raise Unavailable(SOURCE_UNAVAILABLE) from None
    deadline = time.monotonic() + timeout_seconds
    timed_out = False

    def past_deadline() -> int:
        nonlocal timed_out
        timed_out = cancel.cancelled or time.monotonic() > deadline
        return 1 if timed_out else 0  # non-zero interrupts the statement

    conn.set_progress_handler(past_deadline, SQLITE_PROGRESS_STEPS)
    try:
        cursor = conn.execute(sql) if params is None else conn.execute(sql, dict(params))
        rows = cursor.fetchmany(max_rows + 1)
        columns = [d[0] for d in cursor.description or ()]
        return columns, rows
    except sqlite3.OperationalError as error:
        if timed_out:
            raise Timeout(QUERY_TIMED_OUT, data={"timeoutSeconds": timeout_seconds}) from None
        if "readonly" in str(error) or "read-only" in str(error):
            raise InvalidInput(QUERY_READ_ONLY, data={"reason": "read_only"}) from None
        raise InvalidInput(QUERY_FAILED, data={"reason": "database", "detail": str(error)}) from None
    except sqlite3.Error as error:
        raise InvalidInput(QUERY_FAILED, data={"reason": "database", "detail": str(error)}) from None
    finally:
        conn.close()

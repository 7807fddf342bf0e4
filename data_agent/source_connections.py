"""Connections to tenants' PostgreSQL data sources, kept open between queries of the same source.

Opening one would be a noticeable part of every ``run_query`` (docs/benchmarks.md), more with TLS
and SCRAM. So each process keeps up to
``DATA_AGENT_POOL_SIZE_PER_SOURCE`` idle connections per data source and closes one idle for
``DATA_AGENT_POOL_IDLE_SECONDS``. How many run at once is still bounded by the data source's
threads (``data_agent.query_pool``); this only keeps the idle ones.

- **Keyed by the URL itself** (a hash of it, credentials included): a data source whose URL
  changes (user, password, host, database, options) gets new connections, and the old ones are
  never handed out again; they close when idle, or at once when the catalogue cache sees the change
  (``source_connections_close``). A deleted data source is refused before a connection is asked
  for (its ontology is gone: ``data_agent.catalogue``).
- **Each checkout starts as a new connection would**: a connection comes back only after its
  transaction is rolled back (which undoes every ``SET`` and ``set_config`` made in it) and
  ``DISCARD ALL`` (what a rollback leaves: advisory locks, prepared statements, ``LISTEN``, temporary
  tables, session defaults), as PgBouncer resets a server connection. The executor sets the read-only
  transaction and the statement timeout on every query, as it did on its own connections.
- **Never reused**: a connection whose query was cancelled from another thread (a late cancel
  request would hit the next caller's statement), a broken one, or one that does not come back
  clean. A connection the server cut while idle is found by the query's first statement; the
  executor then drops the source's idle connections and runs the query once more on a new one.

Not psycopg_pool, which the hot path uses (``core.db``): its background threads log the driver's
connection error text, which names hosts and users (the executor never logs it), it runs threads of
its own per pool (one pool per data source here), and an unreachable source would make a caller
wait for the pool's timeout where a direct connect fails at once. SQLite sources are opened per
query as before: opening a local file costs microseconds and its handles belong to one thread.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from core.conf import gatehouse_settings


@dataclass
class _Idle:
    conn: psycopg.Connection[Any]
    since: float


# Idle connections by source key, the most recently given back last.
_idle: dict[str, list[_Idle]] = {}
_lock = threading.Lock()
_sweeper: threading.Thread | None = None


def _key(url: str) -> str:
    # A hash, so no dictionary here holds a password as its key.
    return hashlib.sha256(url.encode()).hexdigest()


def source_connection_reuse(*, url: str) -> psycopg.Connection[Any] | None:
    """An idle connection to ``url``, or None (connect anew). Expired ones met on the way close."""
    limit = time.monotonic() - gatehouse_settings.DATA_AGENT_POOL_IDLE_SECONDS
    expired: list[psycopg.Connection[Any]] = []
    found = None
    with _lock:
        idle = _idle.get(_key(url), [])
        while idle and found is None:
            item = idle.pop()
            if item.since > limit and not item.conn.closed:
                found = item.conn
            else:
                expired.append(item.conn)
    for conn in expired:
        conn.close()
    return found


def source_connection_give(*, url: str, conn: psycopg.Connection[Any], reusable: bool) -> None:
    """Keep ``conn`` for the next query of ``url`` if it comes back clean, else close it."""
    if reusable and _reset(conn):
        with _lock:
            idle = _idle.setdefault(_key(url), [])
            if len(idle) < gatehouse_settings.DATA_AGENT_POOL_SIZE_PER_SOURCE:
                idle.append(_Idle(conn, time.monotonic()))
                _sweeper_start()
                return
    conn.close()


def source_connections_close(*, url: str) -> None:
    """Close every idle connection to ``url``: its source changed, or the server cut them."""
    with _lock:
        idle = _idle.pop(_key(url), [])
    for item in idle:
        item.conn.close()


def _reset(conn: psycopg.Connection[Any]) -> bool:
    if conn.closed or conn.broken:
        return False
    try:
        conn.rollback()
        conn.autocommit = True  # DISCARD ALL cannot run inside a transaction
        conn.execute("DISCARD ALL")
        conn.autocommit = False
    except psycopg.Error:
        return False
    return conn.info.transaction_status == TransactionStatus.IDLE


def _sweeper_start() -> None:
    # Under _lock. Idle connections must close even if no query of any source comes again.
    global _sweeper
    if _sweeper is None:
        _sweeper = threading.Thread(target=_sweep, name="data-source-connections-sweep", daemon=True)
        _sweeper.start()


def _sweep() -> None:
    global _sweeper
    while True:
        idle_seconds = gatehouse_settings.DATA_AGENT_POOL_IDLE_SECONDS
        time.sleep(max(1.0, idle_seconds / 4))
        limit = time.monotonic() - idle_seconds
        with _lock:
            expired = [item.conn for idle in _idle.values() for item in idle if item.since <= limit]
            for key, idle in list(_idle.items()):
                idle[:] = [item for item in idle if item.since > limit]
                if not idle:
                    del _idle[key]
            done = not _idle
            if done:
                _sweeper = None
        for conn in expired:
            conn.close()
        if done:
            return

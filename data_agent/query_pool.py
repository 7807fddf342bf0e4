"""Where queries on tenants' data sources run: a few threads of their own per data source, taken
only after the person's and the tenant's fair-use slots (``data_agent.query_slots``).

Queries used to run on asyncio's default executor, which everything blocking in the process
shares and which has a handful of threads: six slow queries from one person left every other
query waiting for them. Now each data source has its own pool of
``DATA_AGENT_QUERY_WORKERS_PER_SOURCE`` threads in each process, and a query is admitted only when
one of them is free, so nothing queues: a query over the person's, the tenant's or the data
source's cap is refused at once with -32029 and a retry hint.

Every slot comes back on every path. The data source's thread is given back when its query really
ends (a done-callback, whatever the outcome); the person's and tenant's slots when the call ends,
by a ``finally``. A caller that stops waiting (a disconnect, the tool's own timeout) also cancels
the query in the database, so it does not run on to its statement timeout for nobody.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from core.conf import gatehouse_settings
from core.errors import RateLimited
from data_agent.executor import CONNECT_TIMEOUT_SECONDS, QueryCancel
from data_agent.query_run import QueryRun, query_gate_and_run
from data_agent.query_slots import QueryCaller, query_slot_take

PER_SOURCE = "{n} concurrent queries per data source"
# Pools of data sources nobody queried lately are closed once there are more than this many.
MAX_IDLE_POOLS = 32


@dataclass(frozen=True)
class QuerySource:
    """A tenant's data source as a query needs it. ``url`` carries credentials: never log it."""

    id: int
    kind: str
    url: str = field(repr=False)
    allowed_tables: frozenset[str]
    datasets_by_table: Mapping[str, str]


@dataclass
class _SourcePool:
    executor: ThreadPoolExecutor
    size: int
    # When each running query started (monotonic), by a token of its own.
    running: dict[object, float] = field(default_factory=dict)


_pools: dict[int, _SourcePool] = {}
_pools_lock = threading.Lock()


def _pool_enter(source_id: int, size: int) -> tuple[_SourcePool, object] | float:
    """A thread of ``source_id``'s pool, or (all busy) how long its oldest query has been running."""
    now = time.monotonic()
    with _pools_lock:
        pool = _pools.get(source_id)
        if pool is None or pool.size != size:
            # A new size (the setting changed): the old pool finishes its queries, then its threads end.
            if pool is not None:
                pool.executor.shutdown(wait=False)
            _idle_pools_close()
            pool = _pools[source_id] = _SourcePool(
                ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"data-source-{source_id}"), size
            )
        if len(pool.running) >= size:
            return now - min(pool.running.values())
        token = object()
        pool.running[token] = now
        return pool, token


def _pool_leave(pool: _SourcePool, token: object) -> None:
    with _pools_lock:
        pool.running.pop(token, None)


def _idle_pools_close() -> None:
    # Under _pools_lock. Idle threads of a ThreadPoolExecutor never end by themselves.
    if len(_pools) < MAX_IDLE_POOLS:
        return
    for source_id, pool in list(_pools.items()):
        if not pool.running:
            pool.executor.shutdown(wait=False)
            del _pools[source_id]


def _source_refusal(size: int, oldest_running: float, timeout: float) -> RateLimited:
    # The oldest query ends by its connect and statement timeouts at the latest.
    wait = math.ceil(CONNECT_TIMEOUT_SECONDS + timeout - oldest_running)
    return RateLimited(
        limit=PER_SOURCE.format(n=size), retry_after_seconds=min(max(wait, 1), math.ceil(timeout))
    )


async def query_run_fairly(
    *, caller: QueryCaller, source: QuerySource, sql: str, params: Mapping[str, Any] | None = None
) -> QueryRun:
    """Gate, run and trace ``sql`` on ``source`` for ``caller``, within the fair-use limits;
    ``params`` are bound to its ``:name`` placeholders (``data_agent.sql_parameters``).

    Raises ``RateLimited`` at once when the caller, their tenant or the data source already has as
    many queries running as allowed; otherwise as ``query_gate_and_run``."""
    timeout = float(gatehouse_settings.DATA_AGENT_QUERY_TIMEOUT_SECONDS)
    size = gatehouse_settings.DATA_AGENT_QUERY_WORKERS_PER_SOURCE
    slot = await query_slot_take(caller=caller, timeout_seconds=timeout)
    try:
        entered = _pool_enter(source.id, size)
        if isinstance(entered, float):
            raise _source_refusal(size, entered, timeout)
        pool, token = entered
        cancel = QueryCancel()
        try:
            future: Future[QueryRun] = pool.executor.submit(
                query_gate_and_run,
                sql=sql,
                kind=source.kind,
                url=source.url,
                allowed_tables=source.allowed_tables,
                datasets_by_table=source.datasets_by_table,
                timeout_seconds=timeout,
                cancel=cancel,
                params=params,
            )
        except BaseException:
            _pool_leave(pool, token)
            raise
        future.add_done_callback(lambda _: _pool_leave(pool, token))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # Off the event loop: PostgreSQL's cancel request is a connection of its own.
            threading.Thread(target=cancel.cancel, name="query-cancel", daemon=True).start()
            raise
    finally:
        await slot.give()

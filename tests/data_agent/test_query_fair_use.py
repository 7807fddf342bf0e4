"""Fair use of data sources, in process: the person's and tenant's query slots (in Redis, and per
process without it) and each data source's own bounded pool of threads. Over a cap, a query is
refused at once with a retry hint; every slot comes back whatever way its query ended."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import time

import pytest
import redis

from core.errors import InvalidInput, RateLimited, Timeout
from data_agent import query_pool, query_slots
from data_agent.query_pool import QuerySource, query_run_fairly
from data_agent.query_slots import QueryCaller, query_slot_take
from tests.support.ratelimit_support import TEST_REDIS_URL
from tests.support.waiting import eventually

REDIS_URL = TEST_REDIS_URL
# Nothing listens on port 9 (discard) here: a Redis that does not answer.
DEAD_REDIS_URL = "redis://127.0.0.1:9/0"
ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"

ALICE = QueryCaller(tenant_id=1, user_id=10)
ALICE_ELSEWHERE = QueryCaller(tenant_id=2, user_id=10)
BOB = QueryCaller(tenant_id=1, user_id=11)
CAROL = QueryCaller(tenant_id=1, user_id=12)


@pytest.fixture
def limits(settings):
    """Set the fair-use settings; slots are counted under a key prefix of the test's own."""
    query_slots._redis_state.paused_until = 0.0

    def configure(
        *, storage: str = "memory://", person: int = 2, tenant: int = 3, workers: int = 4, timeout=2
    ):
        settings.GATEHOUSE = {
            **settings.GATEHOUSE,
            "RATE_LIMIT_STORAGE_URL": storage,
            "RATE_LIMIT_KEY_PREFIX": f"test-fair-use-{secrets.token_hex(4)}",
            "DATA_AGENT_CONCURRENT_QUERIES_PER_PERSON": person,
            "DATA_AGENT_CONCURRENT_QUERIES_PER_TENANT": tenant,
            "DATA_AGENT_QUERY_WORKERS_PER_SOURCE": workers,
            "DATA_AGENT_QUERY_TIMEOUT_SECONDS": timeout,
        }

    yield configure
    query_slots._redis_state.paused_until = 0.0


@pytest.fixture
def source(tmp_path) -> QuerySource:
    path = tmp_path / "source.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO items VALUES (1), (2)")
    conn.commit()
    conn.close()
    return QuerySource(
        id=int(time.monotonic_ns() % 1_000_000_000),
        kind="sqlite",
        url=f"sqlite:///{path}",
        allowed_tables=frozenset({"items"}),
        datasets_by_table={"items": "Items"},
    )


def _running(source: QuerySource) -> int:
    """How many queries hold one of the source's threads in this process now."""
    pool = query_pool._pools.get(source.id)
    return len(pool.running) if pool is not None else 0


async def _refusal(caller: QueryCaller, query_seconds: float = 2) -> RateLimited:
    with pytest.raises(RateLimited) as refused:
        await query_slot_take(caller=caller, timeout_seconds=query_seconds)
    return refused.value


@pytest.mark.parametrize("storage", ["memory://", REDIS_URL])
async def test_a_person_over_their_cap_is_refused_at_once_and_a_given_slot_comes_back(limits, storage):
    limits(storage=storage, person=2, tenant=5)
    first = await query_slot_take(caller=ALICE, timeout_seconds=2)
    second = await query_slot_take(caller=ALICE, timeout_seconds=2)
    assert (first.in_redis, second.in_redis) == (storage == REDIS_URL,) * 2

    refused = await _refusal(ALICE)
    assert refused.jsonrpc_code == -32029
    assert refused.data == {"limit": "2 concurrent queries per person", "retryAfterSeconds": 2}
    # Someone else in the tenant, and alice in another tenant, still have slots.
    others = [
        await query_slot_take(caller=BOB, timeout_seconds=2),
        await query_slot_take(caller=ALICE_ELSEWHERE, timeout_seconds=2),
    ]

    await first.give()
    await first.give()  # twice is harmless
    third = await query_slot_take(caller=ALICE, timeout_seconds=2)
    for slot in (second, third, *others):
        await slot.give()


@pytest.mark.parametrize("storage", ["memory://", REDIS_URL])
async def test_a_tenant_over_its_cap_is_refused_whoever_asks(limits, storage):
    limits(storage=storage, person=2, tenant=3)
    held = [await query_slot_take(caller=caller, timeout_seconds=2) for caller in (ALICE, ALICE, BOB)]
    refused = await _refusal(CAROL)
    assert refused.data is not None
    assert refused.data["limit"] == "3 concurrent queries per tenant"
    # A refusal takes nothing: once one query ends, carol gets its slot.
    await held[0].give()
    held[0] = await query_slot_take(caller=CAROL, timeout_seconds=2)
    for slot in held:
        await slot.give()


async def test_redis_counts_slots_taken_by_other_processes(limits, settings):
    limits(storage=REDIS_URL, person=2, tenant=5)
    # Another worker's two running queries: leases in Redis that this process never took.
    person_key, _ = query_slots._keys(ALICE)
    store = redis.Redis.from_url(REDIS_URL)
    try:
        now_ms = int(time.time() * 1000)
        store.zadd(person_key, {"other-worker-1": now_ms + 60_000, "other-worker-2": now_ms + 60_000})
        refused = await _refusal(ALICE, query_seconds=30)
        assert refused.data is not None
        assert refused.data["retryAfterSeconds"] == 30

        # A worker killed mid-query never gives its leases back: they expire by themselves.
        store.zadd(person_key, {"other-worker-1": now_ms - 1, "other-worker-2": now_ms - 1})
        slot = await query_slot_take(caller=ALICE, timeout_seconds=2)
        assert slot.in_redis
        await slot.give()
        assert store.zcard(person_key) == 0
    finally:
        store.delete(person_key)
        store.close()


async def test_without_an_answering_redis_each_process_counts_its_own(limits, caplog):
    limits(storage=DEAD_REDIS_URL, person=1, tenant=5)
    slot = await query_slot_take(caller=ALICE, timeout_seconds=2)
    assert not slot.in_redis
    assert query_slots.REDIS_UNAVAILABLE in caplog.text
    refused = await _refusal(ALICE)
    assert refused.data is not None
    assert refused.data["limit"] == "1 concurrent queries per person"
    await slot.give()
    await (await query_slot_take(caller=ALICE, timeout_seconds=2)).give()


async def test_a_data_source_runs_only_as_many_queries_as_it_has_threads(limits, source):
    limits(person=5, tenant=5, workers=2, timeout=3)
    running = [
        asyncio.create_task(query_run_fairly(caller=caller, source=source, sql=ENDLESS))
        for caller in (ALICE, BOB)
    ]
    await eventually(lambda: _running(source) == 2, within=30, what="both queries on the source's threads")
    started = time.monotonic()
    with pytest.raises(RateLimited) as refused:
        await query_run_fairly(caller=CAROL, source=source, sql="SELECT id FROM items")
    # Refused at once, not after the running queries: well under their 3 s limit.
    assert time.monotonic() - started < 1.5
    assert refused.value.data is not None
    assert refused.value.data["limit"] == "2 concurrent queries per data source"
    assert 1 <= refused.value.data["retryAfterSeconds"] <= 3
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


async def test_every_slot_comes_back_after_a_timeout_an_error_and_a_cancellation(limits, source):
    limits(person=1, tenant=1, workers=1, timeout=1)
    with pytest.raises(Timeout):
        await query_run_fairly(caller=ALICE, source=source, sql=ENDLESS)
    with pytest.raises(InvalidInput):
        await query_run_fairly(caller=ALICE, source=source, sql="SELECT nope FROM items")
    with pytest.raises(InvalidInput):
        await query_run_fairly(caller=ALICE, source=source, sql="DELETE FROM items")

    task = asyncio.create_task(query_run_fairly(caller=ALICE, source=source, sql=ENDLESS))
    await eventually(lambda: _running(source) == 1, within=30, what="the query on the source's thread")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The cancelled query stops at once (well before its 1 s limit) and gives its thread back.
    await eventually(lambda: _running(source) == 0, within=0.3, what="the cancelled query's thread back")
    run = await query_run_fairly(caller=ALICE, source=source, sql="SELECT id FROM items ORDER BY id")
    assert run.result.rows == [[1], [2]]

"""Rate-limit leases: a worker spends slots it leased from Redis without a round trip, Redis never
counts more than the limit, unspent slots go back, and nothing is lost when Redis or the clock misbehaves."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio
from limits import RateLimitItem, parse

from core.ratelimit import leases as ratelimit_leases
from core.ratelimit.leases import AHEAD_SHARE, GIVE_BACK_FAILED, PERIOD_SHARE, LeaseBook
from tests.support.ratelimit_support import TEST_REDIS_URL
from tests.support.switchable_redis import SwitchableRedis

REDIS_URL = TEST_REDIS_URL
SIZE = 16
LEASE_SECONDS = 0.1
WHO = ("tool", 1, 1, "whoami")


class Clocks:
    """The book's two clocks, moved by hand: monotonic for a lease's life, wall for Redis's window."""

    def __init__(self) -> None:
        self.elapsed = 0.0
        self.wall_start = time.time()

    def monotonic(self) -> float:
        return self.elapsed

    def wall(self) -> float:
        return self.wall_start + self.elapsed

    def advance(self, seconds: float) -> None:
        self.elapsed += seconds


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"gatehouse-test-leases-{secrets.token_hex(4)}"
    yield name
    store = redis.Redis.from_url(REDIS_URL)
    keys = list(store.scan_iter(f"{name}:*"))
    if keys:
        store.delete(*keys)
    store.close()


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


@pytest.fixture
async def clients() -> AsyncIterator[list[redis.asyncio.Redis]]:
    made: list[redis.asyncio.Redis] = []
    yield made
    for client in made:
        await client.aclose()


@pytest.fixture
def open_book(prefix, clocks, clients):
    """A worker's book (each call: another worker), on the test Redis or another URL."""

    def open_(url: str = REDIS_URL, *, size: int = SIZE) -> LeaseBook:
        # As core.ratelimit.limits's: a bounded pool that a burst queues for (longer waits: a shared machine).
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, max_connections=50, timeout=30.0, socket_timeout=5.0, socket_connect_timeout=5.0
        )
        client = redis.asyncio.Redis(connection_pool=pool)
        clients.append(client)
        return LeaseBook(
            client=client,
            prefixed=lambda key: f"{prefix}:{key}",
            size=size,
            seconds=LEASE_SECONDS,
            sync_client=lambda: redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5),
            clock=clocks.monotonic,
            wall=clocks.wall,
        )

    return open_


def counted(prefix: str, item: RateLimitItem, identifiers: tuple = WHO, *, at: float | None = None) -> int:
    """The calls Redis counts in the window ending ``at`` (now), as the limits library reads it."""
    since = (time.time() if at is None else at) - item.get_expiry()
    store = redis.Redis.from_url(REDIS_URL)
    try:
        times = store.lrange(f"{prefix}:{item.key_for(*identifiers)}", 0, -1)
    finally:
        store.close()
    return sum(float(stamp) >= since for stamp in times)


async def allowed(book: LeaseBook, item: RateLimitItem, *, tries: int, identifiers: tuple = WHO) -> int:
    outcomes = [await book.hit(item, identifiers) for _ in range(tries)]
    return sum(outcome is None for outcome in outcomes)


async def allowed_at_once(book: LeaseBook, item: RateLimitItem, *, tries: int) -> int:
    outcomes = await asyncio.gather(*(book.hit(item, WHO) for _ in range(tries)))
    return sum(outcome is None for outcome in outcomes)


# Far from the limit: one round trip per lease.


async def test_far_from_the_limit_a_lease_serves_the_next_calls_without_asking_redis(
    open_book, prefix, clocks
):
    book, item = open_book(), parse("1000/minute")
    assert await allowed(book, item, tries=1) == 1
    # The call itself and as many again as the book may lease ahead, counted in Redis at once.
    assert counted(prefix, item, at=clocks.wall()) == 1 + SIZE
    assert await allowed(book, item, tries=SIZE) == SIZE
    assert counted(prefix, item, at=clocks.wall()) == 1 + SIZE
    assert await allowed(book, item, tries=1) == 1
    assert counted(prefix, item, at=clocks.wall()) == 2 * (1 + SIZE)


async def test_no_more_than_an_eighth_of_what_is_left_is_leased_ahead(open_book, prefix, clocks):
    book, item = open_book(), parse("40/minute")
    assert await allowed(book, item, tries=1) == 1
    assert counted(prefix, item, at=clocks.wall()) == 1 + 40 // AHEAD_SHARE


@pytest.mark.parametrize("rate", ["3/minute", f"{AHEAD_SHARE - 1}/minute"])
async def test_a_small_limit_is_never_leased_ahead_and_is_counted_exactly(open_book, prefix, clocks, rate):
    book, item = open_book(), parse(rate)
    for calls in range(1, item.amount + 1):
        assert await book.hit(item, WHO) is None
        assert counted(prefix, item, at=clocks.wall()) == calls
    first_call = clocks.wall()
    clocks.advance(1.0)
    # Refused with the time the oldest counted call leaves the window.
    assert await book.hit(item, WHO) == pytest.approx(first_call + 60, abs=1e-5)
    assert counted(prefix, item, at=clocks.wall()) == item.amount


async def test_with_no_lease_size_each_call_asks_for_itself_only(open_book, prefix, clocks):
    book, item = open_book(size=0), parse("1000/minute")
    assert await allowed(book, item, tries=3) == 3
    assert counted(prefix, item, at=clocks.wall()) == 3


# The limit holds.


async def test_a_burst_far_past_a_large_limit_lets_exactly_the_limit_through(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/minute")
    assert await allowed_at_once(book, item, tries=2500) == 1000
    assert counted(prefix, item, at=clocks.wall()) == 1000


async def test_two_workers_never_get_more_than_the_limit_between_them(open_book, prefix, clocks):
    first, second, item = open_book(), open_book(), parse("200/minute")
    results = await asyncio.gather(
        *(book.hit(item, WHO) for _ in range(150) for book in (first, second)),
    )
    let_through = sum(outcome is None for outcome in results)
    assert let_through <= 200
    # What is missing is at most what one worker leased ahead and had not spent when the other was
    # refused; once those leases expire, the slots come back and are let through.
    assert let_through >= 200 - 2 * SIZE
    clocks.advance(LEASE_SECONDS)
    await first.expired_give_back()
    await second.expired_give_back()
    let_through += await allowed(first, item, tries=SIZE) + await allowed(second, item, tries=SIZE)
    # Leases handed back were leased again; hand back the last ones too.
    clocks.advance(LEASE_SECONDS)
    await first.expired_give_back()
    await second.expired_give_back()
    assert counted(prefix, item, at=clocks.wall()) == let_through
    assert let_through <= 200


async def test_one_worker_s_leased_slots_are_seen_by_the_other_at_once(open_book, prefix, clocks):
    first, second, item = open_book(), open_book(), parse("24/minute")
    assert await allowed(first, item, tries=1) == 1  # leases 1 + 24 // 8
    holding = 24 // AHEAD_SHARE
    assert await allowed(second, item, tries=30) == 24 - 1 - holding
    # The first spends what it holds; nothing more anywhere.
    assert await allowed(first, item, tries=10) == holding
    assert counted(prefix, item, at=clocks.wall()) == 24


# Unspent slots go back.


async def test_unspent_slots_go_back_when_the_lease_expires(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/minute")
    assert await allowed(book, item, tries=3) == 3
    clocks.advance(LEASE_SECONDS)
    await book.expired_give_back()
    assert counted(prefix, item, at=clocks.wall()) == 3
    assert book.keys_held == 0


async def test_an_expired_lease_is_handed_back_with_the_next_request(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/minute")
    assert await allowed(book, item, tries=1) == 1
    clocks.advance(LEASE_SECONDS)
    assert await allowed(book, item, tries=1) == 1
    assert counted(prefix, item, at=clocks.wall()) == 1 + (1 + SIZE)


async def test_a_lease_is_not_spent_at_the_moment_it_expires(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/minute")
    assert await allowed(book, item, tries=1) == 1
    clocks.elapsed = LEASE_SECONDS * 0.999
    assert await allowed(book, item, tries=1) == 1
    assert counted(prefix, item, at=clocks.wall()) == 1 + SIZE
    clocks.elapsed = LEASE_SECONDS
    assert await allowed(book, item, tries=1) == 1
    assert counted(prefix, item, at=clocks.wall()) == 2 + (1 + SIZE)


async def test_a_lease_on_a_short_period_lives_a_twentieth_of_it(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/second")
    assert await allowed(book, item, tries=1) == 1
    clocks.advance(1 / PERIOD_SHARE)
    assert await allowed(book, item, tries=1) == 1
    # The first lease's unspent slots went back with the second request.
    assert counted(prefix, item, at=clocks.wall()) == 1 + (1 + SIZE)


async def test_at_exit_every_unspent_slot_goes_back(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/minute")
    other_item = parse("500/minute")
    assert await allowed(book, item, tries=2) == 2
    assert await allowed(book, other_item, tries=5) == 5
    ratelimit_leases.rate_limit_leases_give_back()
    assert counted(prefix, item, at=clocks.wall()) == 2
    assert counted(prefix, other_item, at=clocks.wall()) == 5
    assert book.keys_held == 0


# Clock edges.


async def test_a_call_counts_until_one_period_after_its_lease(open_book, prefix, clocks):
    book, item = open_book(), parse("9/minute")
    assert await allowed(book, item, tries=9) == 9
    clocks.advance(60 - 1e-3)
    assert await allowed(book, item, tries=1) == 0
    clocks.advance(2e-3)
    assert await allowed(book, item, tries=9) == 9
    assert await allowed(book, item, tries=1) == 0


async def test_a_wall_clock_stepping_back_lets_no_more_through(open_book, prefix, clocks):
    book, item = open_book(), parse("100/minute")
    assert await allowed(book, item, tries=60) == 60
    clocks.wall_start -= 30
    assert await allowed(book, item, tries=100) == 40


# Hostile load.


async def test_many_keys_are_forgotten_once_their_leases_expire(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/minute")
    keys = [("tool", 1, user, "whoami") for user in range(1000)]
    outcomes = await asyncio.gather(*(book.hit(item, key) for key in keys))
    assert all(outcome is None for outcome in outcomes)
    assert book.keys_held == len(keys)
    clocks.advance(LEASE_SECONDS)
    await book.expired_give_back()
    assert book.keys_held == 0
    assert [counted(prefix, item, key, at=clocks.wall()) for key in keys[:5]] == [1] * 5
    store = redis.Redis.from_url(REDIS_URL)
    try:
        expiries = [store.ttl(f"{prefix}:{item.key_for(*key)}") for key in keys[::100]]
    finally:
        store.close()
    assert all(0 < seconds <= 60 for seconds in expiries)


async def test_a_cancelled_caller_leaves_the_others_served(open_book, prefix, clocks):
    book, item = open_book(), parse("1000/minute")
    calls = [asyncio.ensure_future(book.hit(item, WHO)) for _ in range(5)]
    await asyncio.sleep(0)  # each has started: the first asked Redis, the others wait for it
    calls[0].cancel()
    assert await asyncio.gather(*calls[1:]) == [None] * 4
    clocks.advance(LEASE_SECONDS)
    await book.expired_give_back()
    # The cancelled call's slot went back with the unspent ones.
    assert counted(prefix, item, at=clocks.wall()) == 4


# Redis going away.


async def test_when_redis_dies_mid_lease_the_leased_slots_are_spent_and_then_every_caller_hears(
    open_book, prefix, clocks
):
    item = parse("1000/minute")
    with SwitchableRedis() as proxy:
        book = open_book(proxy.url)
        assert await allowed(book, item, tries=1) == 1
        proxy.switch_off()
        # Already counted in Redis: spent as leased.
        assert await allowed(book, item, tries=SIZE) == SIZE
        # Then every caller of a request hears the error (the caller counts per process), none hangs.
        outcomes = await asyncio.gather(*(book.hit(item, WHO) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(outcome, redis.RedisError | OSError) for outcome in outcomes)
    assert counted(prefix, item, at=clocks.wall()) == 1 + SIZE


async def test_slots_that_cannot_go_back_stay_counted_and_are_told(open_book, prefix, clocks, caplog):
    item = parse("1000/minute")
    with SwitchableRedis() as proxy, caplog.at_level(logging.WARNING, logger="core.ratelimit.limits"):
        book = open_book(proxy.url)
        assert await allowed(book, item, tries=2) == 2
        proxy.switch_off()
        clocks.advance(LEASE_SECONDS)
        await book.expired_give_back()
    assert book.keys_held == 0
    # The stricter side: counted, never let through uncounted.
    assert counted(prefix, item, at=clocks.wall()) == 1 + SIZE
    [message] = [record.getMessage() for record in caplog.records if record.name == "core.ratelimit.limits"]
    assert message.startswith(GIVE_BACK_FAILED.split("%d")[0])
    assert f"{SIZE - 1} leased" in message

"""Where rate limits count: the shared storage (Redis), and this process's stand-in while it does
not answer.

``core.ratelimit.limits`` decides which limit applies; this module counts a call against it. Each process
(and event loop) keeps one storage per (URL, key prefix), with a bounded pool of Redis connections
so a burst queues for one, a per-process limiter that counts alone while the shared storage is
down (``core.ratelimit.fallback``), and, for MCP calls on Redis, this worker's leases
(``core.ratelimit.leases``). The moving window, and why: ``core.ratelimit.limits``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from limits import RateLimitItem
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindowRateLimiter
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from core.conf import gatehouse_settings
from core.ratelimit.fallback import (
    fallback_item,
    shared_storage_answered,
    shared_storage_due,
    shared_storage_failed,
)
from core.ratelimit.leases import LeaseBook


@dataclass(frozen=True, slots=True)
class AppliedLimit:
    """The limit that applies to one request, and what its counter is keyed by."""

    item: RateLimitItem
    counted_as: str

    @property
    def text(self) -> str:
        return f"{self.item.amount} per {self.item.multiples} {self.item.GRANULARITY.name}"

    def described(self, template: str | None) -> str:
        """The limit as the refused client reads it: ``template`` with ``{amount}`` and ``{period}``
        (``"{amount} registrations per {period} per address"`` reads "10 registrations per hour per
        address"), else the plain ``text``."""
        if template is None:
            return self.text
        unit = self.item.GRANULARITY.name
        period = unit if self.item.multiples == 1 else f"{self.item.multiples} {unit}s"
        return template.format(amount=self.item.amount, period=period)

    @property
    def period_seconds(self) -> int:
        return int(self.item.get_expiry())


_STRATEGY = MovingWindowRateLimiter
_ASYNC_STRATEGY = AsyncMovingWindowRateLimiter
# A healthy Redis answers in well under a millisecond; past this it is treated as down.
STORAGE_TIMEOUT_SECONDS = 0.5
# Redis connections per process and event loop; a burst beyond waits for one to free up, for
# as long as a busy (not broken) Redis could plausibly keep it waiting.
STORAGE_POOL_SIZE = 50
STORAGE_POOL_WAIT_SECONDS = 2.0
_POOLED_SCHEMES = frozenset({"redis", "rediss", "redis+unix"})
_PER_PROCESS_SCHEMES = frozenset({"memory", "async+memory"})


class Store:
    """One storage and limiter for one storage URL and key prefix, the per-process limiter that
    stands in for it while it does not answer (None when it is per-process already), and, for MCP
    calls on Redis, this worker's leases on it (None: every call is its own round trip)."""

    def __init__(self, limiter: Any, fallback: Any | None, leases: LeaseBook | None = None) -> None:
        self.limiter = limiter
        self.fallback = fallback
        self.leases = leases

    async def hit(self, item: RateLimitItem, identifiers: tuple[Any, ...]) -> float | None:
        """Count one call in the shared storage (``_hit_async``), through a lease when there are."""
        if self.leases is not None:
            return await self.leases.hit(item, identifiers)
        return await _hit_async(self.limiter, item, identifiers)

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        base = self.limiter.storage.base_exceptions
        return (*(base if isinstance(base, tuple) else (base,)), OSError)


_sync_stores: dict[tuple[str, str], Store] = {}
# The asyncio Redis client belongs to the event loop it first ran on.
_async_stores: dict[tuple[str, str], tuple[asyncio.AbstractEventLoop, Store]] = {}


def rate_limit_storage_shared(url: str) -> bool:
    """Whether a storage URL is shared by processes (Redis and the like), not one process's memory."""
    return urlsplit(url).scheme not in _PER_PROCESS_SCHEMES


def _storage_options(url: str, *, asynchronous: bool) -> dict[str, Any]:
    scheme = urlsplit(url).scheme
    if not scheme.startswith("redis"):
        return {}
    from redis.backoff import NoBackoff

    if asynchronous:
        from redis.asyncio.retry import Retry as AsyncRetry

        retry: Any = AsyncRetry(NoBackoff(), retries=1)
    else:
        from redis.retry import Retry

        retry = Retry(NoBackoff(), retries=1)
    # One immediate retry covers a pooled connection the server closed; no backoff, since a
    # Redis that is down must not hold up the call it was only meant to count.
    connection: dict[str, Any] = {
        "socket_timeout": STORAGE_TIMEOUT_SECONDS,
        "socket_connect_timeout": STORAGE_TIMEOUT_SECONDS,
        "retry": retry,
    }
    if not asynchronous:
        return connection
    if scheme not in _POOLED_SCHEMES:
        return {**connection, "implementation": "redispy"}
    from redis.asyncio import BlockingConnectionPool

    # redis-py's default pool raises once its connections are all busy, which a burst of calls
    # on one event loop does at once (and failing open would lift every limit for a while);
    # this one makes the burst queue for a free connection instead.
    pool = BlockingConnectionPool.from_url(
        url.replace("redis+unix://", "unix://"),
        max_connections=STORAGE_POOL_SIZE,
        timeout=STORAGE_POOL_WAIT_SECONDS,
        **connection,
    )
    return {"implementation": "redispy", "connection_pool": pool}


def _storage_config() -> tuple[str, str]:
    return gatehouse_settings.RATE_LIMIT_STORAGE_URL, gatehouse_settings.RATE_LIMIT_KEY_PREFIX


def storage_sync() -> Store:
    config = _storage_config()
    store = _sync_stores.get(config)
    if store is None:
        url, prefix = config
        storage = storage_from_string(url, key_prefix=prefix, **_storage_options(url, asynchronous=False))
        fallback = _STRATEGY(MemoryStorage()) if rate_limit_storage_shared(url) else None
        store = _sync_stores[config] = Store(_STRATEGY(storage), fallback)
    return store


def storage_async() -> Store:
    config = _storage_config()
    loop = asyncio.get_running_loop()
    entry = _async_stores.get(config)
    if entry is None or entry[0] is not loop:
        url, prefix = config
        plain_url = url.removeprefix("async+")
        options = _storage_options(plain_url, asynchronous=True)
        storage = storage_from_string(f"async+{plain_url}", key_prefix=prefix, **options)
        shared = rate_limit_storage_shared(plain_url)
        fallback = _ASYNC_STRATEGY(storage_from_string("async+memory://")) if shared else None
        leases = _leases_open(storage, plain_url, prefix) if shared else None
        entry = _async_stores[config] = (loop, Store(_ASYNC_STRATEGY(storage), fallback, leases))
    return entry[1]


def _leases_open(storage: Any, url: str, prefix: str) -> LeaseBook | None:
    size = gatehouse_settings.RATE_LIMIT_LEASE_SIZE
    if not urlsplit(url).scheme.startswith("redis") or size <= 0:
        return None

    def sync_client() -> Any:
        # At exit, when the event loop that owns the asyncio client is gone.
        sync_storage: Any = storage_from_string(
            url, key_prefix=prefix, **_storage_options(url, asynchronous=False)
        )
        return sync_storage.get_connection()

    return LeaseBook(
        client=storage.bridge.get_connection(),
        prefixed=storage.bridge.prefixed_key,
        size=size,
        seconds=gatehouse_settings.RATE_LIMIT_LEASE_MS / 1000,
        sync_client=sync_client,
    )


async def _hit_async(limiter: Any, item: RateLimitItem, identifiers: tuple[Any, ...]) -> float | None:
    """Count one hit: None when allowed, else when the oldest counted hit leaves the window."""
    if await limiter.hit(item, *identifiers):
        return None
    return float((await limiter.get_window_stats(item, *identifiers)).reset_time)


def _hit(limiter: Any, item: RateLimitItem, identifiers: tuple[Any, ...]) -> float | None:
    if limiter.hit(item, *identifiers):
        return None
    return float(limiter.get_window_stats(item, *identifiers).reset_time)


def _stand_in(applied: AppliedLimit, *, scope: str) -> AppliedLimit:
    return AppliedLimit(fallback_item(scope=scope, item=applied.item), applied.counted_as)


async def storage_count_async(
    store: Store, applied: AppliedLimit, identifiers: tuple[Any, ...], *, scope: str
) -> tuple[AppliedLimit, float | None]:
    """Count in the shared storage, or in this process's while it does not answer: the limit
    counted against, and None (allowed) or when a slot frees."""
    if store.fallback is None:
        return applied, await _hit_async(store.limiter, applied.item, identifiers)
    if shared_storage_due():
        try:
            reset_time = await store.hit(applied.item, identifiers)
        except store.errors as error:
            shared_storage_failed(error)
        else:
            shared_storage_answered()
            return applied, reset_time
    stand_in = _stand_in(applied, scope=scope)
    return stand_in, await _hit_async(store.fallback, stand_in.item, identifiers)


def storage_count(
    store: Store, applied: AppliedLimit, identifiers: tuple[Any, ...], *, scope: str
) -> tuple[AppliedLimit, float | None]:
    """``storage_count_async``, for the synchronous storage."""
    if store.fallback is None:
        return applied, _hit(store.limiter, applied.item, identifiers)
    if shared_storage_due():
        try:
            reset_time = _hit(store.limiter, applied.item, identifiers)
        except store.errors as error:
            shared_storage_failed(error)
        else:
            shared_storage_answered()
            return applied, reset_time
    stand_in = _stand_in(applied, scope=scope)
    return stand_in, _hit(store.fallback, stand_in.item, identifiers)

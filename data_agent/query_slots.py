"""How many queries one person, and one tenant, may have running on data sources at once.

A slow query holds a database connection and a worker thread until its statement timeout; without
a cap, one person's slow queries could hold every one and everybody else's would wait behind them.
A query over a cap is refused at once (``RateLimited``, -32029, with ``retryAfterSeconds``), never
queued: a queue would only move the wait.

Across processes when the rate-limit storage is Redis (``RATE_LIMIT_STORAGE_URL``, the same server
and the same short timeouts as ``core.ratelimit.limits``): each running query holds a lease, a member of a
sorted set per person and one per tenant, scored by when the lease expires. A lease outlives the
longest run its query can have (the statement timeout plus a margin for connecting and the gate),
so the slots of a worker killed mid-query come back by themselves soon after. Taking a lease is one
Lua script (drop expired leases, check both counts, add to both), so two processes never both take
the last slot. Without Redis, or while it does not answer, each process counts its own queries (a
warning is logged at most once a minute): N processes then allow up to N times the limits.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from core.conf import gatehouse_settings
from core.errors import RateLimited

logger = logging.getLogger(__name__)

# Connecting (at most 5 s), the gate and the lineage, on top of the statement timeout: a lease may
# only expire once its query has certainly ended.
LEASE_MARGIN_SECONDS = 30
# Those of core.ratelimit.limits: a Redis that does not answer must not hold up the query it only counts.
REDIS_TIMEOUT_SECONDS = 0.5
REDIS_PAUSE_SECONDS = 5.0
WARNING_INTERVAL_SECONDS = 60.0
REDIS_UNAVAILABLE = "Query slot storage (Redis) unavailable; counting concurrent queries per process"
_REDIS_SCHEMES = {"redis", "rediss", "redis+unix"}

PER_PERSON = "{n} concurrent queries per person"
PER_TENANT = "{n} concurrent queries per tenant"

# KEYS: the person's set, the tenant's set. ARGV: lease length (ms), the person's limit, the
# tenant's limit, the lease id. Returns {0, 0} when taken, else {which key is full (1 or 2),
# milliseconds until that key's oldest lease expires}. Redis's own clock, so every process agrees.
_TAKE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local lease_ms = tonumber(ARGV[1])
local limits = {tonumber(ARGV[2]), tonumber(ARGV[3])}
for i = 1, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= limits[i] then
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    return {i, tonumber(oldest[2]) - now}
  end
end
for i = 1, 2 do
  redis.call('ZADD', KEYS[i], now + lease_ms, ARGV[4])
  redis.call('PEXPIRE', KEYS[i], lease_ms)
end
return {0, 0}
"""


@dataclass(frozen=True)
class QueryCaller:
    """Whose query this is: the person (in their tenant) the slots are counted for."""

    tenant_id: int
    user_id: int


def _keys(caller: QueryCaller) -> tuple[str, str]:
    # The tenant in braces: a Redis Cluster keeps both keys of one script in one slot.
    base = f"{gatehouse_settings.RATE_LIMIT_KEY_PREFIX}:queries:{{{caller.tenant_id}}}"
    return f"{base}:person:{caller.user_id}", f"{base}:tenant"


def _limits() -> tuple[int, int]:
    return (
        gatehouse_settings.DATA_AGENT_CONCURRENT_QUERIES_PER_PERSON,
        gatehouse_settings.DATA_AGENT_CONCURRENT_QUERIES_PER_TENANT,
    )


def _refusal(which: int, limits: tuple[int, int], lease_left_seconds: float, timeout: float) -> RateLimited:
    # The oldest running query ends by its statement timeout at the latest: an honest upper bound.
    wait = math.ceil(lease_left_seconds - LEASE_MARGIN_SECONDS)
    template = PER_PERSON if which == 1 else PER_TENANT
    return RateLimited(
        limit=template.format(n=limits[which - 1]), retry_after_seconds=min(max(wait, 1), math.ceil(timeout))
    )


class _LocalSlots:
    """Per-process leases: the fallback without Redis, and while it does not answer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: dict[str, dict[str, float]] = {}

    def take(
        self, keys: tuple[str, str], limits: tuple[int, int], lease_id: str, lease_seconds: float
    ) -> tuple[int, float]:
        now = time.monotonic()
        with self._lock:
            for which, (key, limit) in enumerate(zip(keys, limits, strict=True), start=1):
                leases = self._leases.get(key, {})
                for expired in [lease for lease, expiry in leases.items() if expiry <= now]:
                    del leases[expired]
                if len(leases) >= limit:
                    return which, min(leases.values()) - now
            for key in keys:
                self._leases.setdefault(key, {})[lease_id] = now + lease_seconds
        return 0, 0.0

    def give(self, keys: tuple[str, str], lease_id: str) -> None:
        with self._lock:
            for key in keys:
                leases = self._leases.get(key)
                if leases is not None:
                    leases.pop(lease_id, None)
                    if not leases:
                        del self._leases[key]


_local = _LocalSlots()


class _RedisState:
    def __init__(self) -> None:
        self.paused_until = 0.0
        self.last_warning = -math.inf
        # An asyncio Redis client belongs to the event loop it was made on.
        self.clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def failed(self, error: BaseException) -> None:
        now = time.monotonic()
        self.paused_until = now + REDIS_PAUSE_SECONDS
        if now - self.last_warning >= WARNING_INTERVAL_SECONDS:
            self.last_warning = now
            logger.warning("%s (%s)", REDIS_UNAVAILABLE, type(error).__name__)


_redis_state = _RedisState()


def _redis_client() -> Any | None:
    """This loop's client for the rate-limit storage, or None when it is not Redis (or paused)."""
    url = gatehouse_settings.RATE_LIMIT_STORAGE_URL.removeprefix("async+")
    if urlsplit(url).scheme not in _REDIS_SCHEMES or time.monotonic() < _redis_state.paused_until:
        return None
    loop = asyncio.get_running_loop()
    clients = _redis_state.clients.setdefault(loop, {})
    client = clients.get(url)
    if client is None:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        client = clients[url] = Redis.from_url(
            url.replace("redis+unix://", "unix://"),
            socket_timeout=REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), retries=1),
        )
    return client


def _redis_errors() -> tuple[type[BaseException], ...]:
    from redis.exceptions import RedisError

    return (RedisError, OSError)


@dataclass
class QuerySlot:
    """A running query's place in its person's and tenant's counts; give it back exactly once."""

    keys: tuple[str, str]
    lease_id: str
    in_redis: bool
    given: bool = False

    async def give(self) -> None:
        if self.given:
            return
        self.given = True
        if not self.in_redis:
            _local.give(self.keys, self.lease_id)
            return
        client = _redis_client()
        if client is None:
            return  # Redis is paused: the lease expires by itself.
        try:
            async with client.pipeline(transaction=False) as pipe:
                for key in self.keys:
                    pipe.zrem(key, self.lease_id)
                await pipe.execute()
        except _redis_errors() as error:
            _redis_state.failed(error)


async def query_slot_take(*, caller: QueryCaller, timeout_seconds: float) -> QuerySlot:
    """A slot for one query of ``caller``'s; raises ``RateLimited`` at once when the person or the
    tenant already has as many queries running as allowed."""
    keys, limits = _keys(caller), _limits()
    lease_id = uuid.uuid4().hex
    lease_seconds = timeout_seconds + LEASE_MARGIN_SECONDS
    client = _redis_client()
    if client is not None:
        try:
            which, left_ms = await client.eval(
                _TAKE, 2, *keys, math.ceil(lease_seconds * 1000), *limits, lease_id
            )
        except _redis_errors() as error:
            _redis_state.failed(error)
        else:
            if which:
                raise _refusal(int(which), limits, int(left_ms) / 1000, timeout_seconds)
            return QuerySlot(keys=keys, lease_id=lease_id, in_redis=True)
    which, left = _local.take(keys, limits, lease_id, lease_seconds)
    if which:
        raise _refusal(which, limits, left, timeout_seconds)
    return QuerySlot(keys=keys, lease_id=lease_id, in_redis=False)

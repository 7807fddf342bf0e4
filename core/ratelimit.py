"""Rate limits shared by every worker.

Contract used by the rest of the code:

* ``await rate_limit_mcp(identity=..., scope=RateLimitScope.TOOL, target=tool_name, expensive=...)``
  counts one MCP call and raises ``errors.RateLimited`` when the caller is over the limit.
* ``rate_limit_http(scope=RateLimitScope.LOGIN, key=...)`` does the same, synchronously (call it
  from sync code: it may read the rules through the ORM), for pages and OAuth endpoints keyed by
  client address (and username for logins).

Which limit applies: ``RateLimitRule`` rows override ``RATE_LIMITS`` (core.conf), the most
specific first: (tenant, target), (tenant, every target), (every tenant, target), (every tenant,
every target), then the default. A tool rule's target is a tool name; a resource rule's target is
a URI prefix, the longest matching one winning. A rule without a target therefore also overrides
the stricter ``tool_expensive`` default for that tenant; name an expensive tool in a rule of its own
to keep it apart. The per-IP scopes (authorize, login, register) read only rules without tenant or
target. A limit of 0 refuses everything; a default of None means no limit, and then nothing is
counted at all. The rules are cached per process for ``RATE_LIMIT_RULE_CACHE_SECONDS``, so the
common path is a few dict lookups and, when a limit applies, one storage round trip; on Redis,
MCP calls far from their limit share one round trip per lease of a few (core.ratelimit_leases).

What is counted: a tool call per (tenant, user, tool); a resource read per (tenant, user, the
matching rule's prefix, or every resource when none matched); an HTTP request per (scope, key).
Two users, or one user in two tenants, never share a counter.

Strategy: the moving window. Each check is one Redis round trip either way (a Lua script), and
the moving window is exact: at most N calls in any period, no burst of 2N across a window boundary,
and its retry hint is exact too (when the oldest counted call leaves the window), so a client that
waits as told is let in. The sliding window counter would keep two integers per key instead of up
to N timestamps, and estimates both count and hint; at our limits (tens to a few hundred per
minute) the memory is small and exactness is worth more. Switch ``_STRATEGY`` if operators set
limits of many thousands per period.
MCP calls on Redis take their slots through short leases, so a call far from its limit makes no
round trip at all; the window stays the one in Redis, and what that costs in accuracy (a leased call
is counted up to a lease's time early; a slot leased ahead by one worker is briefly not another's)
is in core.ratelimit_leases and docs/limits.md.

Storage: ``RATE_LIMIT_STORAGE_URL``, Redis in production so every worker of every
replica shares one count; ``memory://`` counts per process (development). Each process (and event
loop) keeps a bounded pool of Redis connections, so a burst queues for one. When the storage does not
answer, limits are never dropped: each process counts alone in memory until it answers again (sign-in
at a stricter limit), and says so once in the log, in metrics and in ``/health``; see
core.ratelimit_fallback. Starting several processes without a shared storage is warned about at start
(core.ratelimit_processes).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from limits import RateLimitItem, parse
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindowRateLimiter
from limits.limits import (
    RateLimitItemPerDay,
    RateLimitItemPerHour,
    RateLimitItemPerMinute,
    RateLimitItemPerSecond,
)
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from core.conf import gatehouse_settings
from core.db import db_call
from core.errors import RateLimited
from core.identity import Identity
from core.models import RateLimitRule, RateLimitScope
from core.ratelimit_fallback import (
    fallback_item,
    shared_storage_answered,
    shared_storage_due,
    shared_storage_failed,
    shared_storage_probe_due,
)
from core.ratelimit_leases import LeaseBook
from core.ratelimit_rules import PER_IP_SCOPES

logger = logging.getLogger(__name__)

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
# The counter of resource reads that no prefix rule singles out.
EVERY_RESOURCE = "*"


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


@dataclass(frozen=True, slots=True)
class _RuleTable:
    # (scope, tenant_id or None, target) -> limit, for tools and the per-IP scopes.
    exact: dict[tuple[str, int | None, str], RateLimitItem] = field(default_factory=dict)
    # (tenant_id or None) -> [(URI prefix, limit)], longest prefix first, for resources.
    prefixes: dict[int | None, list[tuple[str, RateLimitItem]]] = field(default_factory=dict)


def _item_for(*, limit: int, period_seconds: int) -> RateLimitItem:
    period_seconds = max(period_seconds, 1)
    # The coarsest unit that divides the period exactly, so a rule reads "3 per 1 minute".
    for unit_seconds, item_class in (
        (86400, RateLimitItemPerDay),
        (3600, RateLimitItemPerHour),
        (60, RateLimitItemPerMinute),
    ):
        if period_seconds % unit_seconds == 0:
            return item_class(limit, period_seconds // unit_seconds)
    return RateLimitItemPerSecond(limit, period_seconds)


def _rules_load() -> _RuleTable:
    table = _RuleTable()
    for rule in RateLimitRule.objects.only("scope", "target", "tenant_id", "limit", "period_seconds"):
        item = _item_for(limit=rule.limit, period_seconds=rule.period_seconds)
        if rule.scope == RateLimitScope.RESOURCE:
            table.prefixes.setdefault(rule.tenant_id, []).append((rule.target, item))
        else:
            table.exact[(rule.scope, rule.tenant_id, rule.target)] = item
    for rules in table.prefixes.values():
        rules.sort(key=lambda prefix_and_item: len(prefix_and_item[0]), reverse=True)
    return table


class _RuleCache:
    def __init__(self) -> None:
        self.table: _RuleTable | None = None
        self.loaded_at = 0.0
        self.refreshing = False

    def fresh(self) -> _RuleTable | None:
        seconds = gatehouse_settings.RATE_LIMIT_RULE_CACHE_SECONDS
        if self.table is not None and time.monotonic() - self.loaded_at < seconds:
            return self.table
        return None

    def store(self, table: _RuleTable) -> _RuleTable:
        self.table, self.loaded_at = table, time.monotonic()
        return table

    def get(self) -> _RuleTable:
        return self.fresh() or self.store(_rules_load())

    async def aget(self) -> _RuleTable:
        table = self.fresh()
        if table is not None:
            return table
        # One coroutine reloads while the others keep the stale table: a thundering herd of
        # identical queries every few seconds would cost more than a few seconds of staleness.
        # With caching off (0 s) every call reads, as tests and operators asked.
        if self.refreshing and self.table is not None and gatehouse_settings.RATE_LIMIT_RULE_CACHE_SECONDS:
            return self.table
        self.refreshing = True
        try:
            return self.store(await db_call(_rules_load))
        finally:
            self.refreshing = False


_rules = _RuleCache()


@lru_cache(maxsize=64)
def _default_item(text: str) -> RateLimitItem:
    return parse(text)


def _default(name: str, *, counted_as: str) -> AppliedLimit | None:
    text = gatehouse_settings.RATE_LIMITS.get(name)
    return AppliedLimit(_default_item(text), counted_as) if text else None


def _resolve(
    table: _RuleTable, *, scope: str, tenant_id: int | None, target: str, expensive: bool
) -> AppliedLimit | None:
    if scope == RateLimitScope.RESOURCE:
        for tenant in (tenant_id, None):
            for prefix, item in table.prefixes.get(tenant, ()):
                if target.startswith(prefix):
                    return AppliedLimit(item, prefix or EVERY_RESOURCE)
        return _default("resource", counted_as=EVERY_RESOURCE)
    if scope in PER_IP_SCOPES:
        rule = table.exact.get((scope, None, ""))
        return AppliedLimit(rule, target) if rule is not None else _default(scope, counted_as=target)
    for tenant in (tenant_id, None):
        for rule_target in (target, ""):
            rule = table.exact.get((scope, tenant, rule_target))
            if rule is not None:
                return AppliedLimit(rule, target)
    return _default("tool_expensive" if expensive else "tool", counted_as=target)


def rate_limit_for(
    *, scope: RateLimitScope, tenant_id: int | None, target: str, expensive: bool = False
) -> AppliedLimit | None:
    """The limit that applies (None: no limit). Sync; reads the rules through the cache."""
    return _resolve(_rules.get(), scope=scope, tenant_id=tenant_id, target=target, expensive=expensive)


class _Store:
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


_sync_stores: dict[tuple[str, str], _Store] = {}
# The asyncio Redis client belongs to the event loop it first ran on.
_async_stores: dict[tuple[str, str], tuple[asyncio.AbstractEventLoop, _Store]] = {}


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


def _sync_store() -> _Store:
    config = _storage_config()
    store = _sync_stores.get(config)
    if store is None:
        url, prefix = config
        storage = storage_from_string(url, key_prefix=prefix, **_storage_options(url, asynchronous=False))
        fallback = _STRATEGY(MemoryStorage()) if rate_limit_storage_shared(url) else None
        store = _sync_stores[config] = _Store(_STRATEGY(storage), fallback)
    return store


def _async_store() -> _Store:
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
        entry = _async_stores[config] = (loop, _Store(_ASYNC_STRATEGY(storage), fallback, leases))
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


def _refusal(applied: AppliedLimit, reset_time: float | None, described_as: str | None = None) -> RateLimited:
    period = applied.period_seconds
    wait = period if reset_time is None else math.ceil(reset_time - time.time())
    return RateLimited(limit=applied.described(described_as), retry_after_seconds=min(max(wait, 1), period))


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


async def _count_async(
    store: _Store, applied: AppliedLimit, identifiers: tuple[Any, ...], *, scope: str
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


def _count(
    store: _Store, applied: AppliedLimit, identifiers: tuple[Any, ...], *, scope: str
) -> tuple[AppliedLimit, float | None]:
    """``_count_async``, for the synchronous storage."""
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


async def rate_limit_mcp(
    *, identity: Identity, scope: RateLimitScope, target: str, expensive: bool = False
) -> None:
    """Count one call; raise RateLimited when the caller is over the limit that applies."""
    table = await _rules.aget()
    applied = _resolve(table, scope=scope, tenant_id=identity.tenant_id, target=target, expensive=expensive)
    if applied is None:
        return
    if applied.item.amount == 0:
        raise _refusal(applied, None)
    identifiers = (scope, identity.tenant_id, identity.user_id, applied.counted_as)
    counted, reset_time = await _count_async(_async_store(), applied, identifiers, scope=scope)
    if reset_time is not None:
        raise _refusal(counted, reset_time)


def rate_limit_http(*, scope: RateLimitScope, key: str, described_as: str | None = None) -> None:
    """Count one request for ``key``; raise RateLimited when over the limit that applies (named in
    the refusal by ``described_as``, an ``AppliedLimit.described`` template, when given)."""
    applied = rate_limit_for(scope=scope, tenant_id=None, target=key)
    if applied is None:
        return
    if applied.item.amount == 0:
        raise _refusal(applied, None, described_as)
    counted, reset_time = _count(_sync_store(), applied, (scope, key), scope=scope)
    if reset_time is not None:
        raise _refusal(counted, reset_time, described_as)


def rate_limit_storage_probe() -> None:
    """Ask the shared storage whether it answers, when it is due (config.health): so that a process
    with no limited traffic still notices an outage, and one in fallback notices the recovery
    without waiting for a request. At most once per pause; nothing for a per-process storage."""
    store = _sync_store()
    if store.fallback is None or not shared_storage_probe_due():
        return
    try:
        answers = store.limiter.storage.check()
    except store.errors as error:
        shared_storage_failed(error)
        return
    if answers:
        shared_storage_answered()
    else:
        shared_storage_failed(ConnectionError("no answer to PING"))

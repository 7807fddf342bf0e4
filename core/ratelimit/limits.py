"""Rate limits shared by every worker.

Contract used by the rest of the code:

* ``await rate_limit_call(identity=..., scope=RateLimitScope.TOOL, target=tool_name, expensive=...)``
  counts one call by a person or service client (a tool or resource over MCP, a REST call, a
  workflow's tool) and raises ``errors.RateLimited`` when the caller is over the limit.
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
calls far from their limit share one round trip per lease of a few (core.ratelimit.leases).

What is counted: a tool call per (tenant, user, tool); a resource read per (tenant, user, the
matching rule's prefix, or every resource when none matched); an HTTP request per (scope, key).
Two users, or one user in two tenants, never share a counter.

Strategy: the moving window. Each check is one Redis round trip either way (a Lua script), and
the moving window is exact: at most N calls in any period, no burst of 2N across a window boundary,
and its retry hint is exact too (when the oldest counted call leaves the window), so a client that
waits as told is let in. The sliding window counter would keep two integers per key instead of up
to N timestamps, and estimates both count and hint; at our limits (tens to a few hundred per
minute) the memory is small and exactness is worth more. Switch ``_STRATEGY`` (in
core.ratelimit.storage) if operators set limits of many thousands per period.
Calls on Redis take their slots through short leases, so a call far from its limit makes no
round trip at all; the window stays the one in Redis, and what that costs in accuracy (a leased call
is counted up to a lease's time early; a slot leased ahead by one worker is briefly not another's)
is in core.ratelimit.leases and docs/limits.md.

Storage (core.ratelimit.storage): ``RATE_LIMIT_STORAGE_URL``, Redis in production so every worker
of every replica shares one count; ``memory://`` counts per process (development). Each process (and event
loop) keeps a bounded pool of Redis connections, so a burst queues for one. When the storage does not
answer, limits are never dropped: each process counts alone in memory until it answers again (sign-in
at a stricter limit), and says so once in the log, in metrics and in ``/health``; see
core.ratelimit.fallback. Starting several processes without a shared storage is warned about at start
(core.ratelimit.processes).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from functools import lru_cache

from limits import RateLimitItem, parse
from limits.limits import (
    RateLimitItemPerDay,
    RateLimitItemPerHour,
    RateLimitItemPerMinute,
    RateLimitItemPerSecond,
)

from core.conf import gatehouse_settings
from core.db import db_call
from core.errors import RateLimited
from core.identity import Identity
from core.models import RateLimitRule, RateLimitScope
from core.ratelimit.fallback import shared_storage_answered, shared_storage_failed, shared_storage_probe_due
from core.ratelimit.rules import PER_IP_SCOPES
from core.ratelimit.storage import (
    AppliedLimit,
    storage_async,
    storage_count,
    storage_count_async,
    storage_sync,
)

logger = logging.getLogger(__name__)

EVERY_RESOURCE = "*"


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
    if scope == RateLimitScope.MODEL:
        return _default("model", counted_as=target)
    return _default("tool_expensive" if expensive else "tool", counted_as=target)


def rate_limit_for(
    *, scope: RateLimitScope, tenant_id: int | None, target: str, expensive: bool = False
) -> AppliedLimit | None:
    """The limit that applies (None: no limit). Sync; reads the rules through the cache."""
    return _resolve(_rules.get(), scope=scope, tenant_id=tenant_id, target=target, expensive=expensive)


def _refusal(applied: AppliedLimit, reset_time: float | None, described_as: str | None = None) -> RateLimited:
    period = applied.period_seconds
    wait = period if reset_time is None else math.ceil(reset_time - time.time())
    return RateLimited(limit=applied.described(described_as), retry_after_seconds=min(max(wait, 1), period))


async def rate_limit_call(
    *, identity: Identity, scope: RateLimitScope, target: str, expensive: bool = False
) -> None:
    """Count one call by ``identity`` on ``target``; raise RateLimited when the caller is over the
    limit that applies."""
    table = await _rules.aget()
    applied = _resolve(table, scope=scope, tenant_id=identity.tenant_id, target=target, expensive=expensive)
    if applied is None:
        return
    if applied.item.amount == 0:
        raise _refusal(applied, None)
    identifiers = (scope, identity.tenant_id, identity.user_id, applied.counted_as)
    counted, reset_time = await storage_count_async(storage_async(), applied, identifiers, scope=scope)
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
    counted, reset_time = storage_count(storage_sync(), applied, (scope, key), scope=scope)
    if reset_time is not None:
        raise _refusal(counted, reset_time, described_as)


def rate_limit_storage_probe() -> None:
    """Ask the shared storage whether it answers, when it is due (config.health): so that a process
    with no limited traffic still notices an outage, and one in fallback notices the recovery
    without waiting for a request. At most once per pause; nothing for a per-process storage."""
    store = storage_sync()
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

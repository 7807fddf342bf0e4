"""Rate-limit leases: most MCP calls are counted without a Redis round trip, and Redis keeps the one count.

A round trip to Redis on every call would be a noticeable part of a call's time (docs/benchmarks.md).
So a worker (one event loop of one process) asks Redis for a few slots of a limit at once, a lease, and
spends them on its next calls of that key with no round trip. The slots are written into the moving
window in Redis when they are leased, as calls made at that moment (one Lua script on the very list
the ``limits`` library keeps, so its own checks and window stats read the same count), and Redis
never grants more slots than the limit has left: every worker sees every leased slot at once, and
across all of them no more than the limit is ever counted in a window.

What a lease may hold: the calls of that key waiting in this worker right now (they would each have
asked anyway), plus, leased ahead, at most ``RATE_LIMIT_LEASE_SIZE`` and at most an eighth of what
the window has left. So nothing is leased ahead within 8 of the limit, nor ever for a limit below 8
per period (3/minute is checked per call in Redis, exactly as without leases), and a lease shrinks
as the window fills.

How long: a lease is spent for ``RATE_LIMIT_LEASE_MS`` at most (and at most a twentieth of the
limit's period). Then the slots it did not spend are handed back (removed from the list by the same
script, with the next lease of that key, or by a sweeper task within one lease's time; at exit, by
``atexit``). A slot that cannot be handed back (Redis down, the process killed) stays counted until
it leaves the window: the stricter side, never a call let through uncounted.

What this costs in accuracy, and nothing else (docs/limits.md): a leased call is counted from the
moment its lease was taken, at most a lease's time before it ran, so the limit holds exactly over the
period less a lease's time (at most N calls in any 59.9 s for N/minute); over a whole period, N plus
the slots that the W workers leased in the lease's time before it began (at most W times
RATE_LIMIT_LEASE_SIZE leased ahead). And a caller can be refused while another worker still holds
slots it leased ahead but has not spent, for at most a lease's time. A worker leases only for itself.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItem

logger = logging.getLogger("core.ratelimit.limits")

# Lease ahead at most this share of what the window has left, so only far from the limit.
AHEAD_SHARE = 8
# A lease lives at most this share of its limit's period, so a per-second limit keeps its shape.
PERIOD_SHARE = 20
GIVE_BACK_FAILED = (
    "Could not hand back %d leased rate-limit slots (%s); they stay counted until they leave the window"
)

# One limit's moving window as the limits library keeps it: a list of call times, newest first,
# where a time at or after now - period is in the window. Gives back the slots of an expired lease,
# counts the window, and leases what the caller may have; or refuses with the oldest counted time.
_LEASE_SCRIPT = """
local key = KEYS[1]
local now, limit, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local demand, most_ahead, share = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local back = tonumber(ARGV[8])
if back > 0 then
    redis.call('lrem', key, back, ARGV[7])
end
local since = now - period
local count = math.min(redis.call('llen', key), limit)
if count > 0 and tonumber(redis.call('lindex', key, count - 1)) < since then
    local low, high = 0, count - 1
    count = 0
    while low <= high do
        local middle = math.floor((low + high) / 2)
        if tonumber(redis.call('lindex', key, middle)) >= since then
            count = middle + 1
            low = middle + 1
        else
            high = middle - 1
        end
    end
end
local left = limit - count
if left <= 0 then
    return {0, redis.call('lindex', key, limit - 1)}
end
local granted = math.min(left, demand + math.min(most_ahead, math.floor(left / share)))
for first = 1, granted, 5000 do
    local entries = {}
    for _ = first, math.min(first + 4999, granted) do
        entries[#entries + 1] = ARGV[1]
    end
    redis.call('lpush', key, unpack(entries))
end
redis.call('ltrim', key, 0, count + granted - 1)
redis.call('expire', key, math.ceil(period))
return {granted, ARGV[1]}
"""


@dataclass(slots=True)
class _Lease:
    stamp: str  # the time its slots are counted at in Redis, exactly as stored there
    slots: int  # not spent yet
    until: float  # on the book's clock: spent before, handed back after


class LeaseBook:
    """One worker's leases on one shared storage. ``hit`` has the contract of a moving-window hit:
    None when the call is counted, else when the oldest counted call leaves the window."""

    def __init__(
        self,
        *,
        client: Any,
        prefixed: Callable[[str], str],
        size: int,
        seconds: float,
        sync_client: Callable[[], Any],
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._script = client.register_script(_LEASE_SCRIPT)
        self._client = client
        self._prefixed = prefixed
        self._size = size
        self._seconds = seconds
        self._sync_client = sync_client
        self._clock = clock
        self._wall = wall
        self._leases: dict[str, _Lease] = {}
        self._asking: dict[str, asyncio.Task[float | None]] = {}
        self._waiting: dict[str, int] = {}
        self._sweeper: asyncio.Task[None] | None = None
        _books.add(self)

    @property
    def keys_held(self) -> int:
        """How many keys this worker holds a lease on (bounded: each lives a lease's time)."""
        return len(self._leases)

    async def hit(self, item: RateLimitItem, identifiers: tuple[Any, ...]) -> float | None:
        key = self._prefixed(item.key_for(*identifiers))
        while not self._take(key):
            # One request per key at a time: the calls that arrive meanwhile wait for it, and the
            # next request asks for all of them at once.
            asking = self._asking.get(key)
            if asking is None or asking.done():
                asking = self._ask_for(key, item)
            self._waiting[key] = self._waiting.get(key, 0) + 1
            try:
                refused_until = await asyncio.shield(asking)
            finally:
                self._waiting[key] -= 1
                if not self._waiting[key]:
                    del self._waiting[key]
            if refused_until is not None:
                return refused_until
        return None

    def _take(self, key: str) -> bool:
        lease = self._leases.get(key)
        if lease is None or lease.slots == 0 or lease.until <= self._clock():
            return False
        lease.slots -= 1
        return True

    def _ask_for(self, key: str, item: RateLimitItem) -> asyncio.Task[float | None]:
        demand = 1 + self._waiting.get(key, 0)
        task = asyncio.get_running_loop().create_task(self._ask(key, item, demand))
        # Its callers may all be cancelled; the task still ends, and its error is not left unread.
        task.add_done_callback(_read_outcome)
        self._asking[key] = task
        return task

    async def _ask(self, key: str, item: RateLimitItem, demand: int) -> float | None:
        try:
            expired = self._leases.pop(key, None)
            back = expired.slots if expired is not None else 0
            period = item.get_expiry()
            began, stamp = self._clock(), f"{self._wall():.6f}"
            back_stamp = expired.stamp if expired is not None else ""
            granted, counted_at = await self._script(
                keys=[key],
                args=[stamp, item.amount, period, demand, self._size, AHEAD_SHARE, back_stamp, back],
            )
            if not granted:
                return float(counted_at) + period
            lifetime = min(self._seconds, period / PERIOD_SHARE)
            self._leases[key] = _Lease(stamp=stamp, slots=int(granted), until=began + lifetime)
            self._sweep_soon()
            return None
        finally:
            # Before the task is done, so no caller ever awaits a finished request in a loop.
            if self._asking.get(key) is asyncio.current_task():
                del self._asking[key]

    def _sweep_soon(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        try:
            while self._leases:
                soonest = min(lease.until for lease in self._leases.values())
                await asyncio.sleep(max(soonest - self._clock(), 0.0))
                await self.expired_give_back()
        finally:
            self._sweeper = None

    async def expired_give_back(self) -> None:
        """Forget every expired lease, handing back in one round trip the slots it did not spend."""
        now = self._clock()
        expired = [key for key, lease in self._leases.items() if lease.until <= now]
        unspent = [(key, lease) for key in expired if (lease := self._leases.pop(key)).slots]
        if not unspent:
            return
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for key, lease in unspent:
                    pipe.lrem(key, lease.slots, lease.stamp)
                await pipe.execute()
        except Exception as error:  # a background task: an error has nowhere else to go
            logger.warning(GIVE_BACK_FAILED, sum(lease.slots for _, lease in unspent), error)

    def unspent_give_back(self) -> None:
        """Hand back every lease's unspent slots, synchronously (at exit, when no loop runs)."""
        unspent = [(key, lease) for key, lease in self._leases.items() if lease.slots]
        self._leases.clear()
        if not unspent:
            return
        try:
            pipe = self._sync_client().pipeline(transaction=False)
            for key, lease in unspent:
                pipe.lrem(key, lease.slots, lease.stamp)
            pipe.execute()
        except Exception as error:  # at exit: say so, and let the process end
            logger.warning(GIVE_BACK_FAILED, sum(lease.slots for _, lease in unspent), error)


def _read_outcome(task: asyncio.Task[float | None]) -> None:
    if not task.cancelled():
        task.exception()


_books: weakref.WeakSet[LeaseBook] = weakref.WeakSet()


@atexit.register
def rate_limit_leases_give_back() -> None:
    """Hand back the unspent slots of every worker's leases, so a restart frees them at once."""
    for book in list(_books):
        book.unspent_give_back()

"""What a process does while the shared rate-limit storage (Redis) does not answer.

Failing open would switch every limit off, login's brute-force limit included, and nobody would
know. Instead each process counts on its own, in memory, until the storage answers again: with N
processes a caller may get up to N times a limit, which is why sign-in has a stricter limit of its
own for this time (``RATE_LIMIT_LOGIN_FALLBACK``). Refusing everything instead would turn a Redis
outage into a full outage.

The state is per process, shared by every storage and event loop in it (they all talk to one
Redis): an outage begins at the first failure (one warning, ``gatehouse_rate_limit_fallbacks_total``
counts it, ``gatehouse_rate_limit_fallback_active`` is 1) and ends at the first success (one info
line). In between the storage is asked again at most once per ``STORAGE_PAUSE_SECONDS``, by a single
caller, so a dead Redis costs the other calls nothing. ``/health`` reports the outage as
``degraded`` and ``/health/ready`` fails while it lasts (config.health).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from limits import RateLimitItem, parse

from core.conf import gatehouse_settings
from core.metrics import RATE_LIMIT_FALLBACK_ACTIVE, RATE_LIMIT_FALLBACKS
from core.models import RateLimitScope

logger = logging.getLogger("core.ratelimit.limits")

# After a failure, the shared storage is asked again (by one caller) this long after.
STORAGE_PAUSE_SECONDS = 5.0
FALLBACK_BEGAN = (
    "Rate limit storage unavailable; counting rate limits per process (sign-in at its stricter "
    "fallback limit) until it answers again"
)
FALLBACK_ENDED = "Rate limit storage answers again; rate limits are shared again"
DEGRADED_REASON = "rate limit storage unreachable since {since} ({error}); limits are counted per process"


@dataclass(frozen=True, slots=True)
class Outage:
    since: datetime
    error: str

    @property
    def reason(self) -> str:
        return DEGRADED_REASON.format(since=self.since.isoformat(timespec="seconds"), error=self.error)


class _FallbackState:
    def __init__(self) -> None:
        self.outage: Outage | None = None
        self.retry_at = 0.0
        self.probed_at = -math.inf
        self.lock = threading.Lock()

    def shared_storage_due(self) -> bool:
        """Whether to ask the shared storage now: always when it answered last; during an outage,
        once per pause, and only the caller that claims the attempt."""
        if self.outage is None:
            return True
        with self.lock:
            now = time.monotonic()
            if now < self.retry_at:
                return False
            self.retry_at = now + STORAGE_PAUSE_SECONDS
            return True

    def probe_due(self) -> bool:
        """Whether a health check should ask the storage: as ``shared_storage_due`` during an
        outage; otherwise once per pause, so frequent probes cost one round trip per pause."""
        if self.outage is not None:
            return self.shared_storage_due()
        with self.lock:
            now = time.monotonic()
            if now - self.probed_at < STORAGE_PAUSE_SECONDS:
                return False
            self.probed_at = now
            return True

    def failed(self, error: BaseException) -> None:
        with self.lock:
            self.retry_at = time.monotonic() + STORAGE_PAUSE_SECONDS
            if self.outage is not None:
                return
            self.outage = Outage(since=datetime.now(UTC), error=type(error).__name__)
        RATE_LIMIT_FALLBACKS.inc()
        RATE_LIMIT_FALLBACK_ACTIVE.set(1)
        logger.warning("%s: %s", FALLBACK_BEGAN, error)

    def answered(self) -> None:
        if self.outage is None:
            return
        with self.lock:
            outage, self.outage = self.outage, None
        if outage is None:
            return
        RATE_LIMIT_FALLBACK_ACTIVE.set(0)
        seconds = (datetime.now(UTC) - outage.since).total_seconds()
        logger.info("%s (after %.0f s).", FALLBACK_ENDED, seconds)


_state = _FallbackState()


def rate_limit_outage() -> Outage | None:
    """The current outage of the shared storage, as this process saw it (None: none)."""
    return _state.outage


def shared_storage_due() -> bool:
    return _state.shared_storage_due()


def shared_storage_probe_due() -> bool:
    return _state.probe_due()


def shared_storage_failed(error: BaseException) -> None:
    _state.failed(error)


def shared_storage_answered() -> None:
    _state.answered()


@lru_cache(maxsize=8)
def _fallback_item(text: str) -> RateLimitItem:
    return parse(text)


def _per_second(item: RateLimitItem) -> float:
    return item.amount / item.get_expiry()


def fallback_item(*, scope: str, item: RateLimitItem) -> RateLimitItem:
    """The limit a process counts alone: sign-in's stricter fallback (or its own limit, if that is
    stricter still); every other limit as it is."""
    text = gatehouse_settings.RATE_LIMIT_LOGIN_FALLBACK
    if scope != RateLimitScope.LOGIN or not text:
        return item
    stricter = _fallback_item(text)
    return stricter if _per_second(stricter) < _per_second(item) else item

"""Rate-limit state between tests: each test starts as a freshly started process would.

Reaches into the private module state of ``core.ratelimit.limits`` (the rule cache),
``core.ratelimit.storage`` (the per-process storages) and ``core.ratelimit.fallback`` (the outage of
the shared storage) on purpose: the product never forgets them while it runs, so it offers no way
to, and this is kept out of it. A change to that state must be mirrored here.
"""

from __future__ import annotations

import os

from core.metrics import RATE_LIMIT_FALLBACK_ACTIVE
from core.ratelimit import fallback as ratelimit_fallback
from core.ratelimit import limits as ratelimit
from core.ratelimit import storage as ratelimit_storage


def rate_limit_reset_for_tests() -> None:
    """Forget cached rules, storages and failures, so each test starts from nothing."""
    ratelimit._rules.table = None
    ratelimit_storage._sync_stores.clear()
    ratelimit_storage._async_stores.clear()
    ratelimit_fallback._state = ratelimit_fallback._FallbackState()
    RATE_LIMIT_FALLBACK_ACTIVE.set(0)


# The Redis database of this test run: each lane of `make test` has its own (tests/lanes.py).
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

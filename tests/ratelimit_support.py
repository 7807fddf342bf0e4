"""Rate-limit state between tests: each test starts as a freshly started process would.

Reaches into ``core.ratelimit``'s private module state (the rule cache, the per-process storages,
the time of the last storage warning) on purpose: the product never forgets them while it runs, so
it offers no way to, and this is kept out of it. A change to that state must be mirrored here.
"""

from __future__ import annotations

import math

from core import ratelimit


def rate_limit_reset_for_tests() -> None:
    """Forget cached rules, storages and failures, so each test starts from nothing."""
    ratelimit._rules.table = None
    ratelimit._sync_stores.clear()
    ratelimit._async_stores.clear()
    ratelimit._last_warning = -math.inf

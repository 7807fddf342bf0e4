"""The turn lock: one turn at a time per MCP session (or 2026-07-28 client), on any worker.

The hold is a timestamp on the session's binding row, taken with one conditional UPDATE, so the
database decides between workers; a worker that dies mid-turn leaves a hold that simply expires.

The hold is the turn's longest possible run (its timeout and a margin, tens of seconds), while
most turns take milliseconds: a refused caller is told to retry within ``RETRY_HINT_MAX_SECONDS``
(or sooner, when the hold ends sooner), not when the hold would expire.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from conversations.models import SessionBinding
from conversations.selectors import INITIALIZE_FIRST
from core.errors import Conflict, NotFound

TURN_IN_PROGRESS = "A turn is already in progress in this session; retry in {seconds} s."
# A binding released between a loser's UPDATE and its read is retried this many times.
RACE_ATTEMPTS = 3
# A hold longer than any turn's timeout is a caller's mistake; cap it, so a bad value cannot lock
# a session for years (nor overflow a datetime).
TURN_LOCK_MAX_SECONDS = 24 * 3600
# The longest retry hint a refused turn is given (the hold's end is only the worst case).
RETRY_HINT_MAX_SECONDS = 2


def turn_lock_take(*, key: str, seconds: float) -> None:
    """Hold the binding for one turn of at most ``seconds``; ``Conflict`` while another turn, on
    any worker, holds it. An expired hold (a worker that died mid-turn) is simply taken over."""
    seconds = min(seconds, TURN_LOCK_MAX_SECONDS) if math.isfinite(seconds) and seconds > 0 else 1.0
    # A binding released between our UPDATE and our read is free again: take it on the next round.
    for _ in range(RACE_ATTEMPTS):
        now = timezone.now()
        free = Q(turn_until__isnull=True) | Q(turn_until__lt=now)
        if SessionBinding.objects.filter(free, key=key).update(turn_until=now + timedelta(seconds=seconds)):
            return
        rows = list(SessionBinding.objects.filter(key=key).values_list("turn_until", flat=True)[:1])
        if not rows:
            raise NotFound(INITIALIZE_FIRST)
        # Read the clock again: a turn that won while we waited ends after our first reading plus
        # its hold, and the wait we announce must not exceed its hold.
        held, now = rows[0], timezone.now()
        if held is not None and held > now:
            wait = turn_retry_after_seconds(until=held, now=now)
            raise Conflict(TURN_IN_PROGRESS.format(seconds=wait), retry_after_seconds=wait)
    raise Conflict(TURN_IN_PROGRESS.format(seconds=1), retry_after_seconds=1)


def turn_retry_after_seconds(*, until: datetime, now: datetime) -> int:
    """Whole seconds to wait before retrying: until the hold ends, rounded up, but at most
    ``RETRY_HINT_MAX_SECONDS``, and never 0 (a client told "retry in 0 s" would retry at once)."""
    return max(1, min(RETRY_HINT_MAX_SECONDS, math.ceil((until - now).total_seconds())))


def turn_lock_release(*, key: str) -> None:
    SessionBinding.objects.filter(key=key).update(turn_until=None)

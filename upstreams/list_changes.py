"""An upstream's ``list_changed`` notifications, coalesced before they become a tenant's change.

Each change an upstream announces becomes a change-log row, a ``NOTIFY`` heard by every worker and
frames to every open stream of the tenant (``mcp_gateway.kernel.changes``). An upstream is code
someone else runs: one that sends thousands of notifications a second would otherwise write as
many rows and make every worker's listener and the database busy for everyone, other tenants
included. So per upstream (on this worker's loop): the first notification starts a short window,
the ones inside it ride along, and the window's end logs one change; and at most
``CHANGES_PER_MINUTE`` are logged a minute, the next waiting for the minute to roll over (so the
last change is never lost, only late). What is folded away is counted in
``gatehouse_upstream_notifications_total{outcome="coalesced"}``.

The worker's own copy of the upstream's lists is dropped at every notification (``Catalog.forget``:
no database, no frames), so a caller of this worker sees the new lists at once.

Coalescing bounds what the notifications cost everyone else, but not reading them: each is a line
this worker parses and validates on the loop that serves every tenant's calls. An upstream that
sends more than ``FLOOD_LIMIT`` within ``FLOOD_SECONDS`` on one session is not announcing changes
but misbehaving, so ``FloodBound`` tells the pool to end that session (the call in flight on it
fails, saying why), and the pool opens no new session to that upstream for
``UPSTREAM_FLOOD_COOLDOWN_SECONDS``: calls in between fail at once, saying when it will be tried again,
rather than start a process or a connection that would flood again. Its lists stay as last read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from upstreams.config import ConfigKey, UpstreamConfig
from upstreams.metrics import metrics_upstream_notification

logger = logging.getLogger(__name__)

# How long the notifications of a burst are gathered before one change is logged for them.
WINDOW_SECONDS = 1.0
CHANGES_PER_MINUTE = 10
MINUTE = 60.0
# An upstream whose lists change a few times a minute stays far below this; one that sends
# thousands a second reaches it in well under a second.
FLOOD_LIMIT = 200
FLOOD_SECONDS = 10.0
FLOODED = (
    f"it sent more than {FLOOD_LIMIT} list-change notifications within {FLOOD_SECONDS:g} s, "
    "so Gatehouse ended its session"
)
COOLING_DOWN = (
    f"it sent more than {FLOOD_LIMIT} list-change notifications within {FLOOD_SECONDS:g} s; "
    "Gatehouse connects to it again in {seconds} s"
)


class FloodBound:
    """Counts one session's ``list_changed`` notifications over a sliding window."""

    def __init__(self, *, limit: int = FLOOD_LIMIT, seconds: float = FLOOD_SECONDS) -> None:
        self._limit = limit
        self._seconds = seconds
        self._heard: deque[float] = deque()

    def exceeded(self) -> bool:
        """Notes one more notification; whether the window now holds more than the limit."""
        now = time.monotonic()
        self._heard.append(now)
        while self._heard[0] <= now - self._seconds:
            self._heard.popleft()
        return len(self._heard) > self._limit


@dataclass
class _Upstream:
    """One upstream's announcing: whether a change is waiting, and when the last ones went out."""

    pending: bool = False
    task: asyncio.Task[None] | None = None
    logged: deque[float] = field(default_factory=deque)


class ListChangeCoalescer:
    """Folds each upstream's notifications into at most one logged change per window."""

    def __init__(
        self,
        *,
        announce: Callable[[UpstreamConfig], Awaitable[None]],
        window_seconds: float = WINDOW_SECONDS,
        per_minute: int = CHANGES_PER_MINUTE,
    ) -> None:
        self._announce = announce
        self._window = window_seconds
        self._per_minute = per_minute
        self._upstreams: dict[ConfigKey, _Upstream] = {}

    def heard(self, config: UpstreamConfig) -> None:
        """The upstream said its lists changed (on the event loop, from its session's reader)."""
        state = self._upstreams.get(config.key)
        if state is None:
            self._sweep()
            state = self._upstreams[config.key] = _Upstream()
        if state.pending:
            metrics_upstream_notification(upstream=config.label, outcome="coalesced")
            return
        state.pending = True
        metrics_upstream_notification(upstream=config.label, outcome="announced")
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._announcing(config, state))

    async def _announcing(self, config: UpstreamConfig, state: _Upstream) -> None:
        while state.pending:
            await asyncio.sleep(self._window)
            await asyncio.sleep(self._wait_for_room(state))
            state.pending = False
            state.logged.append(time.monotonic())
            try:
                await self._announce(config)
            except Exception:
                # This worker's copy is dropped all the same; only the clients' notification is lost.
                logger.exception("Could not log the list change of upstream %s", config.label)

    def _sweep(self) -> None:
        """Forget upstreams quiet for a minute (their bound has nothing left to count)."""
        quiet_since = time.monotonic() - MINUTE
        for key, state in list(self._upstreams.items()):
            if not state.pending and (not state.logged or state.logged[-1] <= quiet_since):
                del self._upstreams[key]

    def _wait_for_room(self, state: _Upstream) -> float:
        """Seconds until this upstream may log another change within its bound per minute."""
        now = time.monotonic()
        while state.logged and state.logged[0] <= now - MINUTE:
            state.logged.popleft()
        if len(state.logged) < self._per_minute:
            return 0.0
        return state.logged[0] + MINUTE - now

    def __len__(self) -> int:
        return len(self._upstreams)

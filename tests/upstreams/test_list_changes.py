"""An upstream's ``list_changed`` notifications are coalesced (``upstreams.list_changes``): a burst
is one logged change, at most a bound of them a minute, the last never lost, the rest counted."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest
from mcp_types import ToolListChangedNotification

from core.errors import UpstreamUnavailable
from tests.support.waiting import eventually
from tests.upstreams.support import upstream_config
from upstreams import list_changes
from upstreams import pool as pool_module
from upstreams.config import UpstreamConfig
from upstreams.list_changes import FloodBound, ListChangeCoalescer
from upstreams.metrics import UPSTREAM_NOTIFICATIONS
from upstreams.pool import PooledSession, UpstreamPool

WINDOW = 0.02

FLOODER = upstream_config(id=901, name="flooder")


def _counted(outcome: str, config: UpstreamConfig = FLOODER) -> float:
    # This counter's own samples: the registry's full collection reads the database.
    wanted = {"upstream": config.label, "outcome": outcome}
    for metric in UPSTREAM_NOTIFICATIONS.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels == wanted:
                return sample.value
    return 0.0


@pytest.fixture
def logged() -> list[UpstreamConfig]:
    return []


@pytest.fixture
def coalescer(logged) -> ListChangeCoalescer:
    async def announce(config: UpstreamConfig) -> None:
        logged.append(config)

    return ListChangeCoalescer(announce=announce, window_seconds=WINDOW, per_minute=3)


async def test_a_burst_is_one_change_and_the_rest_is_counted(coalescer, logged):
    """Shown failing before: every notification was logged, 10,000 rows for this burst."""
    coalesced_before = _counted("coalesced")
    for _ in range(10_000):
        coalescer.heard(FLOODER)
    await eventually(lambda: len(logged) == 1, within=5, what="the burst's one change")
    assert _counted("coalesced") - coalesced_before == 9_999
    # The next notification, after the window, is a change of its own.
    coalescer.heard(FLOODER)
    await eventually(lambda: len(logged) == 2, within=5, what="the next change")


async def test_past_the_bound_a_change_waits_for_the_minute_and_is_not_lost(coalescer, logged, monkeypatch):
    monkeypatch.setattr(list_changes, "MINUTE", 0.5)
    for expected in (1, 2, 3):
        coalescer.heard(FLOODER)
        await eventually(lambda expected=expected: len(logged) == expected, within=5, what="a change")
    started = asyncio.get_running_loop().time()
    coalescer.heard(FLOODER)  # the fourth in the "minute": held back, then logged
    await eventually(lambda: len(logged) == 4, within=5, what="the held-back change")
    assert asyncio.get_running_loop().time() - started >= 0.3


async def test_one_upstreams_flood_does_not_hold_back_anothers_change(coalescer, logged):
    other = replace(FLOODER, id=902, name="quiet", tenant_id=2, tenant_slug="globex")
    for _ in range(1_000):
        coalescer.heard(FLOODER)
    coalescer.heard(other)
    await eventually(lambda: len(logged) == 2, within=5, what="both changes")
    assert {config.name for config in logged} == {"flooder", "quiet"}


async def test_a_failed_announcement_does_not_stop_the_next(logged):
    calls = 0

    async def announce(config: UpstreamConfig) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("the database went away")
        logged.append(config)

    coalescer = ListChangeCoalescer(announce=announce, window_seconds=WINDOW, per_minute=3)
    coalescer.heard(FLOODER)
    await eventually(lambda: calls == 1, within=5, what="the first try")
    coalescer.heard(FLOODER)
    await eventually(lambda: len(logged) == 1, within=5, what="the next change")


def test_the_flood_bound_counts_a_sliding_window(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(list_changes.time, "monotonic", lambda: now[0])
    bound = FloodBound(limit=3, seconds=10)
    assert [bound.exceeded() for _ in range(3)] == [False, False, False]
    now[0] += 9.9
    assert bound.exceeded()  # four within ten seconds
    now[0] += 0.2  # the first three have left the window
    assert not bound.exceeded()


async def test_a_session_flooding_past_the_bound_is_ended_and_its_upstream_cools_down(monkeypatch):
    """Shown failing before: every notification was read and announced, however many came."""
    heard: list[UpstreamConfig] = []
    pool = UpstreamPool(on_list_changed=heard.append)
    pooled = PooledSession(pool_key=(FLOODER.key, ()), config=FLOODER)
    handle = pool._message_handler(pooled)
    flooded_before = _counted("flooded")
    for _ in range(list_changes.FLOOD_LIMIT + 50):
        await handle(ToolListChangedNotification())
    assert len(heard) == list_changes.FLOOD_LIMIT  # the rest was not read on
    assert pooled.ended_because == list_changes.FLOODED
    assert pooled.stop.is_set()
    assert _counted("flooded") - flooded_before == 1
    with pytest.raises(UpstreamUnavailable, match="connects to it again in 60 s"):
        await pool._acquire(FLOODER, pooled.pool_key, {})
    # Once the cooldown is over, a session may be opened again.
    real = time.monotonic
    monkeypatch.setattr(pool_module.time, "monotonic", lambda: real() + 61)
    pool._cooling_check(FLOODER)

"""Waiting in tests for the event a test needs (a row, a log line, a process's state), never for a
fixed time: a fixed sleep is too long on an idle machine and too short on a busy one.

The limit of a wait only guards against a hang; a test never measures anything with it. Where the
behaviour under test is time itself (a token must really expire), ``clock_past`` waits until that
moment and no longer.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

# Short against what tests wait for, long against the cost of looking.
POLL_SECONDS = 0.05
# asyncio may wake a timer up to its clock's resolution early; "past" must be strict.
TIMER_SLACK_SECONDS = 0.01


def wait_until(condition: Callable[[], bool], *, within: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g} s: {what}")
        time.sleep(POLL_SECONDS)


async def eventually(
    condition: Callable[[], bool] | Callable[[], Awaitable[bool]], *, within: float, what: str
) -> None:
    """``wait_until`` on the event loop; ``condition`` may be a coroutine function (an ORM query)."""
    deadline = time.monotonic() + within
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g} s: {what}")
        await asyncio.sleep(POLL_SECONDS)


async def clock_past(moment: float, *, clock: Callable[[], float] = time.time) -> None:
    """Return once ``clock`` is past ``moment`` (a token's expiry, an idle limit), as the code under
    test reads the same clock on this machine (``time.monotonic`` is one clock for all processes)."""
    await asyncio.sleep(max(0.0, moment - clock()) + TIMER_SLACK_SECONDS)

"""One event loop per worker process, on a thread of its own, for the async work of steps (a tool
task's call through the MCP server).

A step is synchronous code on the worker's thread; the server's machinery is async and keeps
loop-bound state for the life of the process (the audit trail's group commit, the hot-path
connection pool). A fresh ``asyncio.run`` per step would strand that state on a closed loop, so
every step's coroutine runs on this one loop, and the step waits for it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def step_loop() -> asyncio.AbstractEventLoop:
    """The process's step loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="jobs-step-loop", daemon=True).start()
            _loop = loop
        return _loop


def step_loop_run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the step loop and wait for its outcome (its exception is raised here)."""
    future = asyncio.run_coroutine_threadsafe(coroutine, step_loop())
    try:
        return future.result()
    except BaseException:
        # The worker is stopping (a second Ctrl-C): do not leave the coroutine running behind it.
        future.cancel()
        raise


def step_loop_stop() -> None:
    """Stop the loop (tests: once its pooled connections are closed); the next use starts another."""
    global _loop
    with _lock:
        loop, _loop = _loop, None
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)

"""Turns on the process's one database thread, taken by tenant in rotation.

Every ``db_call`` of a process runs on one thread (``core.db``). In the order the calls arrived,
a tenant with many requests in flight put all of its calls ahead of another tenant's one, and its
flood of model calls made every other tenant's calls wait behind the whole queue
(docs/benchmarks.md, "One tenant's flood of model calls"). Here the calls wait on the event loop
instead, one queue per tenant, and the thread takes the queues in turn: a call waits for at most
one call of each other tenant that has calls waiting, however many that tenant has. Work that
belongs to no tenant (sweeps, commands, sign-in pages) shares one queue of its own.

The owner of a call is the tenant of the request being served (``db_turns_for``: the REST API's
and the MCP endpoint's authentication, and the MCP pipeline's guard for the handlers the SDK runs
in tasks of its own). A call made while the caller already holds the turn (a sync function that
calls back into async code on the same loop) goes straight through: the thread is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterator

_owner: contextvars.ContextVar[int | None] = contextvars.ContextVar("gatehouse_db_turn_owner", default=None)
_holding: contextvars.ContextVar[bool] = contextvars.ContextVar("gatehouse_db_turn_holding", default=False)


class FairTurns:
    """One call at a time, the waiting owners taken in rotation (one event loop's)."""

    def __init__(self) -> None:
        self._busy = False
        # Insertion-ordered: the first key is the next to go; a served key with more waiting goes
        # to the back.
        self._waiting: dict[int | None, deque[asyncio.Future[None]]] = {}

    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def acquire(self, owner: int | None) -> None:
        if not self._busy:
            self._busy = True
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(owner, deque()).append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # Granted as it was cancelled: pass the turn on.
                self.release()
            else:
                queue = self._waiting.get(owner)
                if queue is not None and future in queue:
                    queue.remove(future)
                    if not queue:
                        del self._waiting[owner]
            raise

    def release(self) -> None:
        while self._waiting:
            owner = next(iter(self._waiting))
            queue = self._waiting.pop(owner)
            future = queue.popleft()
            if queue:
                self._waiting[owner] = queue
            if not future.done():
                future.set_result(None)
                return
        self._busy = False


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairTurns] = weakref.WeakKeyDictionary()


def fair_turns() -> FairTurns:
    """The running loop's turns (each loop has its own thread work: tests run many loops)."""
    loop = asyncio.get_running_loop()
    turns = _turns.get(loop)
    if turns is None:
        turns = _turns[loop] = FairTurns()
    return turns


@contextlib.asynccontextmanager
async def db_turn() -> AsyncIterator[None]:
    """Hold the database thread's turn for one call, queued under the current owner."""
    if _holding.get():
        yield
        return
    turns = fair_turns()
    await turns.acquire(_owner.get())
    holding = _holding.set(True)
    try:
        yield
    finally:
        _holding.reset(holding)
        turns.release()


@contextlib.contextmanager
def db_turns_for(*, owner: int | None) -> Iterator[None]:
    """The database calls made within are queued under ``owner`` (a tenant's id)."""
    token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(token)


def db_turns_owner_set(*, owner: int | None) -> None:
    """For the rest of the current task (a request's own, which ends with it): as ``db_turns_for``."""
    _owner.set(owner)

"""The database thread's turns (``core.db_turns``): one call at a time, the waiting tenants taken in
rotation, so that a tenant with many calls waiting delays another's by one call of its own, not by
all of them; a cancelled wait gives its turn away; a call within a held turn goes straight through.
The flood this answers is measured in benchmarks/model_flood.py."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from core.db import db_call
from core.db_turns import FairTurns, db_turn, db_turns_for, fair_turns

pytestmark = pytest.mark.django_db(transaction=True)


async def _ran_in_order(calls: list[tuple[int, str]]) -> list[str]:
    """Queue ``calls`` (owner, label) behind a held turn; the order in which they then ran."""
    ran: list[str] = []
    release = asyncio.Event()

    async def holder() -> None:
        async with db_turn():
            await release.wait()

    async def call(owner: int, label: str) -> None:
        with db_turns_for(owner=owner):
            async with db_turn():
                ran.append(label)

    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = []
    for owner, label in calls:
        waiting.append(asyncio.create_task(call(owner, label)))
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(held, *waiting)
    return ran


async def test_a_flooding_tenants_calls_take_turns_with_another_tenants():
    flood = [(1, f"acme {n}") for n in range(5)]
    ran = await _ran_in_order([*flood, (2, "globex")])
    # In arrival order globex would have been last, behind all five.
    assert ran == ["acme 0", "globex", "acme 1", "acme 2", "acme 3", "acme 4"]


async def test_one_tenants_calls_keep_their_order():
    assert await _ran_in_order([(1, "a"), (1, "b"), (1, "c")]) == ["a", "b", "c"]


async def test_a_cancelled_wait_leaves_the_queue_and_the_turn_moves_on():
    turns = FairTurns()
    await turns.acquire(1)
    cancelled = asyncio.create_task(turns.acquire(2))
    after = asyncio.create_task(turns.acquire(3))
    await asyncio.sleep(0)
    assert turns.waiting() == 2
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert turns.waiting() == 1
    turns.release()
    await asyncio.wait_for(after, 1)
    turns.release()
    # Free again: the next call goes at once.
    await asyncio.wait_for(turns.acquire(4), 1)


async def test_a_wait_cancelled_as_it_is_granted_passes_the_turn_on():
    turns = FairTurns()
    await turns.acquire(1)
    granted = asyncio.create_task(turns.acquire(2))
    nxt = asyncio.create_task(turns.acquire(3))
    await asyncio.sleep(0)
    turns.release()  # grants 2's future...
    granted.cancel()  # ...whose task is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await granted
    await asyncio.wait_for(nxt, 1)


async def test_db_call_runs_within_a_turn_and_a_call_back_into_the_loop_does_not_wait_for_it():
    def nested() -> int:
        # A sync function that goes back to async code on the same loop, which calls db_call.
        return async_to_sync(db_call)(lambda: 7)

    assert await asyncio.wait_for(db_call(nested), 10) == 7
    assert fair_turns().waiting() == 0


async def test_many_callers_of_several_tenants_all_finish():
    async def call(owner: int) -> int:
        with db_turns_for(owner=owner):
            return await db_call(lambda: owner)

    results = await asyncio.wait_for(asyncio.gather(*(call(n % 3) for n in range(30))), 30)
    assert results == [n % 3 for n in range(30)]

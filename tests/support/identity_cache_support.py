"""Stopping an identity cache's listener after a test: the process's own cache is started by the
first MCP request a test makes in process, on that test's event loop, and must not outlive it."""

from __future__ import annotations

import asyncio

from mcp_gateway.kernel.identity_cache import IdentityCache


async def identity_cache_stop(cache: IdentityCache) -> None:
    """Cancel the listener (its connection closes with it) and forget everything kept, so the next
    test's first request starts the cache afresh on its own loop."""
    task, cache._task = cache._task, None
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    cache._pgconn, cache._off = None, False
    cache.clear()

"""Waiting (bounded) for a job to stop running, from the event loop of an MCP tool call.

The worker that runs the step may be on another machine, so the row is the only thing to watch: it
is read every ``poll_seconds``. Each rise of the job's step counter is passed to ``on_progress``
(an MCP progress notification, say), so what a client sees only ever goes up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from core.db import db_call
from jobs.models import Job, JobState
from jobs.selectors import job_get

ProgressCallback = Callable[[int, str], Awaitable[None]]


async def job_wait(
    *,
    tenant_id: int,
    user_id: int,
    job_id: object,
    timeout_seconds: float,
    on_progress: ProgressCallback | None = None,
    poll_seconds: float = 0.25,
) -> Job:
    """The job once it is no longer running (waiting, complete, failed, cancelled), or as it stands
    when ``timeout_seconds`` have passed."""
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    seen = -1
    while True:
        job = await db_call(job_get, tenant_id=tenant_id, user_id=user_id, job_id=job_id)
        if on_progress is not None and job.progress > seen:
            seen = job.progress
            await on_progress(job.progress, job.progress_message)
        if job.state != JobState.RUNNING or time.monotonic() >= deadline:
            return job
        await asyncio.sleep(min(poll_seconds, max(0.0, deadline - time.monotonic())))

"""Upstream sessions left idle are closed, whichever upstream they belong to: one of a configuration
since edited (its stdio child ends with it) is not kept for the life of the server process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import _serve
from tests.e2e.harness import DaphneServer, Person, sdk_client
from tests.e2e.upstream_fixtures import stdio_fields
from tests.support.upstream_support import upstream_row
from tests.support.waiting import clock_past
from upstreams.models import Upstream

pytestmark = pytest.mark.django_db

IDLE_SECONDS = 1
EXIT_DEADLINE_SECONDS = 30


@pytest.fixture(scope="module")
def brisk_server(database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """Upstream sessions idle longer than a second are closed here."""
    yield from _serve(
        tmp_path_factory,
        database_url,
        "upstream-idle",
        UPSTREAM_IDLE_SECONDS=str(IDLE_SECONDS),
        MCP_TOOLSET_CACHE_SECONDS="0",
    )


def _edit(pk: int) -> None:
    row = Upstream.objects.get(pk=pk)
    row.call_timeout_seconds = 30
    row.save()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in {"Z", "X"}


async def test_an_edited_upstream_s_idle_session_is_closed_and_its_stdio_child_ends(brisk_server, committed):
    row = committed(upstream_row, tenant="acme", name="edited", **stdio_fields())
    async with sdk_client(brisk_server, Person("alice")) as (client, _):
        before = await client.call_tool("echo", {"text": "old configuration"})
        # The session went back to the pool, idle, before the answer came back.
        idle_from = time.monotonic()
        assert before.structured_content is not None
        old_child = int(before.structured_content["pid"])
        committed(_edit, pk=row.pk)
        # Longer than the idle limit (the setting's least), so the next lease finds the old
        # session expired.
        await clock_past(idle_from + IDLE_SECONDS, clock=time.monotonic)
        after = await client.call_tool("echo", {"text": "new configuration"})
        assert after.structured_content is not None
        give_up = time.monotonic() + EXIT_DEADLINE_SECONDS
        while _running(old_child):
            assert time.monotonic() < give_up, "the old configuration's stdio child is still running"
            await asyncio.sleep(0.05)

    assert after.structured_content["pid"] != old_child

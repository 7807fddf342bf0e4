"""A worker killed the hard way (SIGKILL) right after answering read-only calls keeps every one of
their audit rows: a row is committed before its answer is sent (for a read-only call, not yet
flushed to disk by PostgreSQL, which only a crash of the database server itself could undo), and a
replay by another process afterwards finds nothing missing and stores nothing twice."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from core.models import AuditAction, AuditEvent, AuditOutcome
from tests.e2e.harness import DaphneServer, Person
from tests.e2e.oauth_driver import minted_token
from tests.e2e.raw_mcp import RawMcp, sse_messages

pytestmark = pytest.mark.django_db

CALLS = 40


@pytest.fixture
def doomed(database_url, tmp_path: Path) -> Iterator[tuple[DaphneServer, Path]]:
    """A worker of its own (it is killed), with its own spool directory."""
    spool = tmp_path / "spool"
    server = DaphneServer(
        database_url=database_url, log_path=tmp_path / "doomed.log", extra_env={"AUDIT_SPOOL_DIR": str(spool)}
    )
    server.start()
    try:
        yield server, spool
    finally:
        server.stop()


async def _whoami(raw: RawMcp, server: DaphneServer, session_id: str) -> str:
    """The request id of one answered ``whoami``."""
    request_id = "kill-" + secrets.token_hex(8)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami"}}
    response = await raw.http.post(
        server.mcp_url, json=body, headers={**raw.headers(session_id), "x-request-id": request_id}
    )
    assert response.status_code == 200, response.text
    [answer] = [message for message in sse_messages(response) if message.get("id") == 1]
    assert "result" in answer, answer
    return request_id


async def test_read_only_calls_answered_just_before_a_sigkill_all_keep_their_rows(doomed, committed):
    server, spool = doomed
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        answered = await asyncio.gather(*[_whoami(raw, server, session_id) for _ in range(CALLS)])
        await sync_to_async(server.kill)()
    finally:
        await raw.aclose()

    # Another process replays whatever the dead one left; the command fails if files still wait.
    await sync_to_async(call_command)("audit_spool_replay", "--dir", str(spool))

    rows = [event async for event in AuditEvent.objects.filter(request_id__in=answered)]
    assert sorted(event.request_id for event in rows) == sorted(answered)
    assert {(event.action, event.outcome, event.target) for event in rows} == {
        (AuditAction.TOOL_CALLED, AuditOutcome.OK, "whoami")
    }

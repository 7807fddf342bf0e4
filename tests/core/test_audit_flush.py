"""Which audit rows wait for the disk: a read-only call that succeeded is answered once its row is
committed (in the table, visible to every reader) without waiting for PostgreSQL to flush that
commit; writes, refusals and failures wait for the flush, and so does any batch holding one."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from asgiref.sync import sync_to_async
from mcp.shared.exceptions import MCPError

from core.audit import store as audit_store
from core.audit.entry import AuditEntry
from core.audit.trail import audit_record_async
from core.db import psycopg_connect_kwargs
from core.errors import PermissionDenied
from core.models import AuditAction, AuditEvent, AuditOutcome
from mcp_gateway.kernel.identity import request_for_identity
from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.pipeline.audit_trail import AuditTrail
from mcp_gateway.transport.stdio import stdio_identity

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]


@pytest.fixture
def statements(monkeypatch) -> list[tuple[int, bool]]:
    """The audit INSERTs built from here on: (rows, flushed)."""
    built: list[tuple[int, bool]] = []
    real = audit_store.insert_sql

    def recording(rows: int, *, flushed: bool = True, native: bool = False) -> str:
        built.append((rows, flushed))
        return real(rows, flushed=flushed, native=native)

    monkeypatch.setattr(audit_store, "insert_sql", recording)
    return built


async def _stored(*entries: AuditEntry) -> int:
    return await AuditEvent.objects.filter(event_id__in=[entry.event_id for entry in entries]).acount()


def test_an_unflushed_insert_is_in_the_table_at_once_and_leaves_the_connection_s_setting_alone():
    entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="read")
    with psycopg.connect(**psycopg_connect_kwargs()) as conn:
        conn.execute(audit_store.insert_sql(1, flushed=False), audit_store.insert_params([entry]))
        [(setting,)] = conn.execute("SHOW synchronous_commit").fetchall()
        # The next statement on this connection commits as every other does.
        assert "synchronous_commit" not in audit_store.insert_sql(1)

    assert setting == "on"
    assert AuditEvent.objects.filter(event_id=entry.event_id).count() == 1


async def test_a_batch_waits_for_the_disk_when_any_of_its_rows_asks_for_it(statements):
    reads = [AuditEntry(action=AuditAction.TOOL_CALLED, target=f"read-{i}") for i in range(3)]
    await asyncio.gather(*(audit_record_async(entry, flushed=False) for entry in reads))
    read, write = (AuditEntry(action=AuditAction.TOOL_CALLED, target=t) for t in ("read", "write"))
    await asyncio.gather(audit_record_async(read, flushed=False), audit_record_async(write))

    assert statements == [(3, False), (2, True)]
    assert await _stored(*reads, read, write) == 5


async def test_a_batch_longer_than_psycopg_s_statement_cache_keeps_every_value_and_every_row(statements):
    # 12 rows make a statement past the 4 kB psycopg parses from its cache: the writer sends it
    # with $n placeholders, through a raw cursor. Hostile text, a refused row and a second copy of
    # a stored event ride along.
    entries = [
        AuditEntry(
            action=AuditAction.TOOL_CALLED,
            target=f"row-{index}",
            username="eve\x00$1",
            ip="127.0.0.1",
            duration_ms=1.5,
            detail={"arguments": {"sql": "select '$2', %s, \ud800"}, "n": index},
        )
        for index in range(10)
    ]
    refused = AuditEntry(action=AuditAction.TOOL_CALLED, target="refused", ip="not-an-address")
    await audit_record_async(entries[0], flushed=False)
    await asyncio.gather(*(audit_record_async(entry, flushed=False) for entry in [*entries, refused]))

    assert statements[0] == (1, False)
    # The batch was refused for its one bad row; then each row went alone.
    assert statements[1] == (11, False)
    assert await _stored(*entries, refused) == 11
    stored = [
        event async for event in AuditEvent.objects.filter(target__startswith="row-").order_by("target")
    ]
    assert [event.target for event in stored] == sorted(f"row-{index}" for index in range(10))
    assert {event.username for event in stored} == {"eve\\u0000$1"}
    assert stored[3].detail["arguments"] == {"sql": "select '$2', %s, \\ud800"}
    assert str(stored[3].ip) == "127.0.0.1"
    bad = await AuditEvent.objects.aget(target="refused")
    assert bad.ip is None
    assert "unstorable" in bad.detail


def test_the_raw_statement_numbers_every_value_of_every_row():
    sql = audit_store.insert_sql(3, native=True)
    assert "%s" not in sql
    assert [f"${n}" in sql for n in (1, 15, 16, 45)] == [True] * 4
    assert "$46" not in sql
    assert len(audit_store.insert_params([AuditEntry(action="x")] * 3)) == 45


def _context(method: str, params: dict[str, Any], identity: Any) -> Any:
    return SimpleNamespace(
        method=method, request_id=1, params=params, request=request_for_identity(identity=identity)
    )


async def _called(owner: Any, method: str, params: dict[str, Any], answer: Any) -> AuditEvent:
    identity = await sync_to_async(stdio_identity)(username="owner", tenant_slug="acme-test")

    async def call_next(ctx: Any) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    with contextlib.suppress(MCPError):
        await AuditTrail(default_registry())(_context(method, params, identity), call_next)
    # Each call is answered only after its row is committed: it is there now.
    return await AuditEvent.objects.aget(username="owner", target=params.get("name", params.get("uri")))


async def test_a_read_only_tool_that_succeeded_does_not_wait_for_the_disk(owner, statements):
    event = await _called(owner, "tools/call", {"name": "whoami", "arguments": {}}, {"content": []})

    assert (event.action, event.outcome) == (AuditAction.TOOL_CALLED, AuditOutcome.OK)
    assert statements == [(1, False)]


async def test_a_resource_read_that_succeeded_does_not_wait_for_the_disk(owner, statements):
    event = await _called(owner, "resources/read", {"uri": "test://static-text"}, {"contents": []})

    assert (event.action, event.outcome) == (AuditAction.RESOURCE_READ, AuditOutcome.OK)
    assert statements == [(1, False)]


async def test_a_write_waits_for_the_disk(owner, statements):
    spec = default_registry().get("set_display_name")
    assert spec is not None
    assert not spec.read_only

    event = await _called(owner, "tools/call", {"name": "set_display_name", "arguments": {}}, {"content": []})

    assert event.outcome == AuditOutcome.OK
    assert statements == [(1, True)]


async def test_a_read_only_tool_that_failed_or_was_refused_waits_for_the_disk(owner, statements):
    failed = await _called(owner, "tools/call", {"name": "whoami"}, {"content": [], "isError": True})
    await AuditEvent.objects.filter(pk=failed.pk).adelete()
    refused = await _called(owner, "tools/call", {"name": "whoami"}, as_mcp_error(PermissionDenied()))

    assert failed.outcome == AuditOutcome.ERROR
    assert (refused.action, refused.outcome) == (AuditAction.PERMISSION_DENIED, AuditOutcome.DENIED)
    assert statements == [(1, True), (1, True)]


async def test_a_tool_the_registry_does_not_know_waits_for_the_disk(owner, statements):
    await _called(owner, "tools/call", {"name": "no_such_tool"}, {"content": []})

    assert statements == [(1, True)]

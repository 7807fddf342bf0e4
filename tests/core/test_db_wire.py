"""The audit writer's wire connection (``core.db._WireConnection``): values as PostgreSQL's text,
one statement at a time on a connection of its own, a lost connection replaced once, and the two
errors the audit store tells apart (unreachable: spool; refused: store the row degraded)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from uuid import uuid4

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import DatabaseError, OperationalError

from core import db as core_db
from core.audit import store as audit_store
from core.audit.entry import AuditEntry
from core.db import hot_path_execute_raw, psycopg_connect_kwargs
from core.models import AuditAction, AuditEvent
from tests.support.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]

WIRE_APPLICATION = "gatehouse-wire-test"


@pytest.fixture
def wire(monkeypatch) -> Iterator[core_db._WireConnection]:
    """A wire connection of its own, named in pg_stat_activity so a test can cut it."""
    kwargs = {**psycopg_connect_kwargs(), "application_name": WIRE_APPLICATION}
    monkeypatch.setattr(core_db, "psycopg_connect_kwargs", lambda: kwargs)
    connection = core_db._WireConnection()
    yield connection
    connection.close()


def _backends() -> list[int]:
    with psycopg.connect(**psycopg_connect_kwargs()) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            [WIRE_APPLICATION],
        ).fetchall()
    return [pid for (pid,) in rows]


def _cut(pids: list[int]) -> None:
    with psycopg.connect(**psycopg_connect_kwargs()) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])


async def _insert(wire: core_db._WireConnection, *entries: AuditEntry, flushed: bool = True) -> None:
    sql = audit_store.insert_sql(len(entries), flushed=flushed, native=True)
    await wire.execute(sql, audit_store.insert_params(entries))


async def test_every_column_arrives_as_it_was_given(wire):
    moment = datetime(2026, 11, 30, 6, 1, 2, 345678, tzinfo=UTC)
    entry = AuditEntry(
        action=AuditAction.TOOL_CALLED,
        created=moment,
        username="ëve ‮gnp.exe",
        ip="2001:db8::1",
        target="whoami",
        duration_ms=1.25,
        detail={"nested": {"list": [1, None, "two"]}, "quote": "it's $1 %s"},
    )
    bare = AuditEntry(action=AuditAction.TOOL_CALLED, target="bare")

    await _insert(wire, entry, bare, flushed=False)

    stored = await AuditEvent.objects.aget(event_id=entry.event_id)
    assert (stored.created, stored.username, str(stored.ip)) == (moment, "ëve ‮gnp.exe", "2001:db8::1")
    assert (stored.duration_ms, stored.detail) == (1.25, entry.detail)
    empty = await AuditEvent.objects.aget(event_id=bare.event_id)
    assert (empty.ip, empty.duration_ms, empty.tenant_id) == (None, None, None)


async def test_a_stored_event_sent_again_is_stored_once(wire):
    entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="twice")
    await _insert(wire, entry)
    await _insert(wire, entry)

    assert await AuditEvent.objects.filter(event_id=entry.event_id).acount() == 1


@pytest.mark.parametrize("value", ["a\x00b", "unpaired \ud800"], ids=["nul", "surrogate"])
async def test_a_value_libpq_cannot_send_is_a_refused_statement_and_the_connection_goes_on(wire, value):
    with pytest.raises(DatabaseError) as refused:
        await wire.execute("SELECT $1::text", [value])

    assert not isinstance(refused.value, OperationalError)
    await wire.execute("SELECT $1::text", ["fine"])


async def test_a_statement_the_database_refuses_is_a_database_error_on_a_connection_still_usable(wire):
    with pytest.raises(DatabaseError) as refused:
        await wire.execute("SELECT $1::inet", ["not-an-address"])

    assert not isinstance(refused.value, OperationalError)
    assert "inet" in str(refused.value)
    [pid] = _backends()
    await wire.execute("SELECT $1::inet", ["127.0.0.1"])
    assert _backends() == [pid]


async def test_statements_are_prepared_once_per_connection(wire):
    for _ in range(3):
        await wire.execute("SELECT $1::int", [1])

    assert list(wire._prepared) == ["SELECT $1::int"]


async def test_behind_a_transaction_pooler_nothing_is_prepared(wire, monkeypatch):
    database = django_settings.DATABASES["default"]
    monkeypatch.setitem(database, "OPTIONS", {**database.get("OPTIONS", {}), "prepare_threshold": None})
    await wire.execute("SELECT $1::int", [1])
    await wire.execute("SELECT $1::int", [2])

    assert wire._prepared == {}


async def test_a_connection_cut_while_idle_is_replaced_and_the_statement_goes_through(wire):
    await wire.execute("SELECT 1", [])
    [before] = _backends()
    _cut([before])
    entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="after the cut")

    await _insert(wire, entry)

    assert await AuditEvent.objects.filter(event_id=entry.event_id).acount() == 1
    [after] = _backends()
    assert after != before


async def test_a_connection_cut_during_the_statement_is_replaced_and_the_statement_sent_again(wire):
    await wire.execute("SELECT 1", [])
    [pid] = _backends()
    entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="cut mid-statement")
    sql = audit_store.insert_sql(1, native=True)
    # The INSERT waits behind a lock the test holds, so the cut lands while it is in flight.
    with psycopg.connect(**psycopg_connect_kwargs()) as holder, holder.transaction():
        holder.execute(f"LOCK TABLE {AuditEvent._meta.db_table} IN EXCLUSIVE MODE")
        sent = asyncio.ensure_future(wire.execute(sql, audit_store.insert_params([entry])))
        await eventually(
            lambda: asyncio.to_thread(_waiting_on_lock, pid), within=10, what="the INSERT waiting on the lock"
        )
        await asyncio.to_thread(_cut, [pid])
    await sent

    assert await AuditEvent.objects.filter(event_id=entry.event_id).acount() == 1


def _waiting_on_lock(pid: int) -> bool:
    with psycopg.connect(**psycopg_connect_kwargs()) as admin:
        [(waiting,)] = admin.execute(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchall()
    return bool(waiting)


async def test_a_database_that_is_not_there_is_operational_error_after_one_more_try(monkeypatch):
    kwargs = {**psycopg_connect_kwargs(), "host": "127.0.0.1", "port": 1, "connect_timeout": 2}
    monkeypatch.setattr(core_db, "psycopg_connect_kwargs", lambda: kwargs)
    connection = core_db._WireConnection()

    with pytest.raises(OperationalError):
        await connection.execute("SELECT 1", [])


async def test_a_cancelled_statement_leaves_nothing_behind_for_the_next(wire):
    slow = asyncio.ensure_future(wire.execute("SELECT pg_sleep(0.5)", []))
    await eventually(_some_backend, within=10, what="the slow statement's connection")
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow

    await wire.execute("SELECT $1::int", [7])
    # The cancelled statement's connection was closed; its backend ends with its sleep.
    await eventually(_one_backend, within=10, what="the cancelled statement's backend gone")


async def _some_backend() -> bool:
    return bool(await asyncio.to_thread(_backends))


async def _one_backend() -> bool:
    return len(await asyncio.to_thread(_backends)) == 1


async def test_a_row_refused_at_the_commit_is_a_refused_statement(wire):
    # Django's foreign keys are checked when the statement's implicit transaction commits, after
    # the rows the statement returned.
    entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="no such client", application_id=2**31 - 1)

    with pytest.raises(DatabaseError) as refused:
        await _insert(wire, entry, flushed=False)

    assert not isinstance(refused.value, OperationalError)
    assert await AuditEvent.objects.filter(event_id=entry.event_id).acount() == 0


async def test_a_statement_larger_than_the_socket_buffer_is_sent_whole(wire):
    # 500 rows of 8 kB details: megabytes, more than a socket takes at once.
    entries = [
        AuditEntry(action=AuditAction.TOOL_CALLED, target=f"big-{index}", detail={"blob": "x" * 8000})
        for index in range(500)
    ]
    await _insert(wire, *entries, flushed=False)

    assert await AuditEvent.objects.filter(target__startswith="big-").acount() == 500


async def test_the_audit_store_refusing_one_row_of_a_batch_stores_the_others_and_that_one_degraded():
    good = AuditEntry(action=AuditAction.TOOL_CALLED, target="good", event_id=uuid4())
    bad = AuditEntry(action=AuditAction.TOOL_CALLED, target="bad", ip="999.1.1.1")

    await audit_store.audit_rows_insert_async([good, bad], execute=hot_path_execute_raw, native=True)

    assert await AuditEvent.objects.filter(event_id=good.event_id).acount() == 1
    degraded = await AuditEvent.objects.aget(event_id=bad.event_id)
    assert degraded.ip is None
    assert degraded.detail["error"] == "DatabaseError"

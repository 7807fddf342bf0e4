"""How audit rows reach the table: one multi-row INSERT, and what happens when the database refuses.

Every row passes ``core.audit.entry.entry_storable`` first, so input alone (a NUL in an argument,
an unpaired surrogate, an over-long name) never fails a statement. Should the database still refuse
a batch for what is in it, its rows are tried one at a time, so one bad row never takes the others
with it; a row refused on its own is stored degraded (links to tenant, user and client dropped, as
a deleted user's would be, and ``detail`` kept as text under ``unstorable``) rather than lost.

"The database is not there" is another matter: the INSERT raises Django's ``OperationalError``
(or ``InterfaceError``) and the caller spools the rows (``core.audit.spool``).

Each INSERT skips a row whose ``event_id`` is already stored, so a retried INSERT that had in fact
committed, or a spool replayed twice, stores every event once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction

from core.audit.entry import AuditEntry, entry_storable
from core.models import AuditEvent

logger = logging.getLogger(__name__)

# Rows per INSERT: bounds the statement's size and the number of distinct statements prepared.
MAX_BATCH = 500
UNAVAILABLE = (OperationalError, InterfaceError)
_DEGRADED_DETAIL_CHARS = 4000

_COLUMNS = (
    "created", "action", "outcome", "tenant_id", "user_id", "username", "application_id", "client_id",
    "session_id", "request_id", "ip", "target", "duration_ms", "detail", "event_id",
)  # fmt: skip


@functools.cache
def insert_sql(rows: int, *, flushed: bool = True, native: bool = False) -> str:
    """One INSERT for ``rows`` events: one statement and one round trip, whatever the batch size.

    ``native=True`` writes PostgreSQL's own ``$1, $2, ...`` placeholders, for the audit trail's wire
    connection (``core.db.hot_path_execute_raw``), which sends the text as it is. psycopg parses a ``%s``
    statement longer than 4 kB (a batch of more than 8 rows) afresh on every execution, with regular
    expressions: under load that scan was a tenth of the endpoint's CPU (py-spy), and the raw form
    of a 20-row batch costs a twentieth of it (``benchmarks/audit_statement.py``).

    Its commit returns once PostgreSQL has flushed it to disk, as commits do by default. With
    ``flushed=False`` it returns once the rows are committed (visible to every reader), and
    PostgreSQL's WAL writer flushes them within three times ``wal_writer_delay`` (0.6 s by
    default): ``synchronous_commit = off`` for this statement alone."""
    on_postgresql = connection.vendor == "postgresql"
    casts = {"ip": "::inet", "detail": "::jsonb", "event_id": "::uuid"} if on_postgresql else {}
    width = len(_COLUMNS)

    def placeholder(row: int, index: int) -> str:
        return f"${row * width + index + 1}" if native else "%s"

    values = [
        "("
        + ", ".join(
            f"{placeholder(row, index)}{casts.get(column, '')}" for index, column in enumerate(_COLUMNS)
        )
        + ")"
        for row in range(rows)
    ]
    # The table name comes from the model, never from input; every value is a bound parameter.
    sql = (
        f"INSERT INTO {AuditEvent._meta.db_table} ({', '.join(_COLUMNS)}) "  # noqa: S608
        f"VALUES {', '.join(values)} ON CONFLICT (event_id) DO NOTHING"
    )
    if on_postgresql and not flushed:
        # The statement runs in a transaction of its own (autocommit), whose commit reads the
        # setting: set_config(..., true) lasts until that commit and no longer. One round trip,
        # where SET LOCAL would need an explicit transaction (three).
        sql += " RETURNING set_config('synchronous_commit', 'off', true)"
    return sql


def insert_params(entries: Sequence[AuditEntry]) -> list[Any]:
    """The bound values of ``insert_sql(len(entries))``; each entry made storable first."""
    return [value for entry in entries for value in _row(entry_storable(entry))]


def _row(entry: AuditEntry) -> tuple[Any, ...]:
    return (
        entry.created, entry.action, entry.outcome, entry.tenant_id, entry.user_id, entry.username,
        entry.application_id, entry.client_id, entry.session_id, entry.request_id, entry.ip,
        entry.target, entry.duration_ms, json.dumps(entry.detail), entry.event_id.hex,
    )  # fmt: skip


def entry_degraded(entry: AuditEntry, error: BaseException) -> AuditEntry:
    """What is left of a row the database refused on its own: nothing it could refuse again."""
    detail = json.dumps(entry_storable(entry).detail)[:_DEGRADED_DETAIL_CHARS]
    return dataclasses.replace(
        entry,
        tenant_id=None,
        user_id=None,
        application_id=None,
        ip=None,
        duration_ms=None,
        detail={"unstorable": detail, "error": type(error).__name__},
    )


def audit_rows_insert(entries: Sequence[AuditEntry]) -> int:
    """Store ``entries`` through Django's connection (synchronous code); the rows newly stored.

    Raises ``OperationalError`` or ``InterfaceError`` when the database is unreachable."""
    stored = 0
    for start in range(0, len(entries), MAX_BATCH):
        stored += _insert_with_fallback(list(entries[start : start + MAX_BATCH]))
    return stored


def _insert_with_fallback(batch: list[AuditEntry]) -> int:
    try:
        return _execute(batch)
    except UNAVAILABLE:
        raise
    except DatabaseError:
        logger.warning("An audit batch of %d rows was refused; storing them one at a time.", len(batch))
    stored = 0
    for entry in batch:
        try:
            stored += _execute([entry])
        except UNAVAILABLE:
            raise
        except DatabaseError as error:
            logger.error("Audit row %s refused (%s); storing it degraded.", entry.event_id, error)
            stored += _execute([entry_degraded(entry, error)])
    return stored


def _execute(batch: list[AuditEntry]) -> int:
    # A savepoint inside the caller's transaction: a refused statement must not abort it.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(insert_sql(len(batch)), insert_params(batch))
        return max(cursor.rowcount, 0)


async def audit_rows_insert_async(
    entries: Sequence[AuditEntry],
    *,
    execute: Callable[[str, Sequence[Any]], Awaitable[None]],
    flushed: bool = True,
    native: bool = False,
) -> None:
    """The same fallback for the MCP endpoint's writer, through ``execute`` (``core.db``'s pool);
    ``flushed`` and ``native`` as for ``insert_sql``."""
    batch = list(entries)
    try:
        await execute(insert_sql(len(batch), flushed=flushed, native=native), insert_params(batch))
        return
    except UNAVAILABLE:
        raise
    except DatabaseError:
        logger.warning("An audit batch of %d rows was refused; storing them one at a time.", len(batch))
    for entry in batch:
        try:
            await execute(insert_sql(1, flushed=flushed, native=native), insert_params([entry]))
        except UNAVAILABLE:
            raise
        except DatabaseError as error:
            logger.error("Audit row %s refused (%s); storing it degraded.", entry.event_id, error)
            statement = insert_sql(1, flushed=flushed, native=native)
            await execute(statement, insert_params([entry_degraded(entry, error)]))

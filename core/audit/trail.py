"""The audit trail: one ``AuditEvent`` row per thing an operator may need to account for.

Two ways in:

* ``audit_record``, synchronous, through the ORM: pages and OAuth endpoints (login, consent,
  registration, tokens) and session changes, which are rare and already on a database thread. It
  writes in the caller's transaction, so the event and what it records commit together.
* ``audit_record_async``, for the MCP endpoint's tool calls and resource reads. Every call waits
  until its row is committed before its response is sent (an answered call is never left
  unaudited), but concurrent calls share one multi-row INSERT on a database connection of the
  trail's own (``core.db.hot_path_execute_raw``; "group commit"), so the cost per call shrinks as
  load grows. A read-only call that succeeded does not wait for PostgreSQL to flush that commit to
  disk (``synchronous_commit = off`` for its statement): its row is in the table when it is
  answered, and on disk a fraction of a second later; only a crash of the database server in
  between loses it. Writes, refusals and failures wait for the flush.

Whatever the input or the connection's state, no row is lost: values are made storable (NUL and
unpaired surrogates escaped, ``detail["sanitized"]`` naming the fields changed:
``core.audit.entry``); a batch the database refuses is retried row by row (``core.audit.store``);
dead connections are swept and the INSERT retried on a fresh one (``core.db``); and a row that
still cannot be written waits in the spool until the database is back (``core.audit.spool``).
Repeated refusals are counted rather than written one by one: ``core.audit.refusals``.

Request id and client address come from the request context (``core.request_context``); every
event also feeds the Prometheus counters (``core.metrics``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any

from django.db.transaction import TransactionManagementError

from core.audit.entry import AuditEntry
from core.audit.spool import audit_spool_append, audit_spool_replay_soon
from core.audit.store import MAX_BATCH, UNAVAILABLE, audit_rows_insert, audit_rows_insert_async
from core.conf import gatehouse_settings
from core.db import hot_path_execute, hot_path_execute_raw, hot_path_raw
from core.identity import Identity
from core.metrics import metrics_observe
from core.models import AuditAction, AuditOutcome
from core.request_context import request_context

logger = logging.getLogger(__name__)

REDACTED = "[redacted]"
# Argument names that carry secrets whatever the tool says about them.
_SECRET_NAME = re.compile(
    r"pass(word|phrase)?|secret|token|api[_-]?key|credential|authorization|cookie", re.IGNORECASE
)
_MAX_STRING = 200
_MAX_ITEMS = 50
_MAX_DEPTH = 4


def audit_entry(
    *,
    action: AuditAction,
    outcome: AuditOutcome = AuditOutcome.OK,
    identity: Identity | None = None,
    session_id: str = "",
    target: str = "",
    duration_ms: float | None = None,
    detail: Mapping[str, Any] | None = None,
) -> AuditEntry:
    """An event on behalf of an MCP caller, with the request's id and address filled in."""
    return _entry(
        action=action,
        outcome=outcome,
        who=_who_from_identity(identity),
        session_id=session_id,
        target=target,
        duration_ms=duration_ms,
        detail=detail,
    )


def _entry(
    *,
    action: AuditAction,
    outcome: AuditOutcome,
    who: dict[str, Any],
    session_id: str,
    target: str,
    duration_ms: float | None = None,
    detail: Mapping[str, Any] | None,
) -> AuditEntry:
    ctx = request_context()
    return AuditEntry(
        action=action,
        outcome=outcome,
        session_id=session_id,
        request_id=ctx.request_id if ctx else "",
        ip=ctx.ip if ctx else None,
        target=target[:500],
        duration_ms=duration_ms,
        detail=dict(detail or {}),
        **who,
    )


def _who_from_identity(identity: Identity | None) -> dict[str, Any]:
    if identity is None:
        return {}
    return {
        "tenant_id": identity.tenant_id,
        "tenant_slug": identity.tenant_slug,
        "user_id": identity.user_id,
        "username": identity.username,
        # 0 is "no OAuth client" (a local stdio session), which has no row to point at.
        "application_id": identity.application_id or None,
        "client_id": identity.client_id,
    }


def _who_from_models(*, user: Any, username: str, tenant: Any, application: Any) -> dict[str, Any]:
    user_id = getattr(user, "pk", None)
    return {
        "tenant_id": getattr(tenant, "pk", None),
        "tenant_slug": getattr(tenant, "slug", ""),
        "user_id": user_id,
        "username": username or (getattr(user, "username", "") if user_id else ""),
        "application_id": getattr(application, "pk", None),
        "client_id": getattr(application, "client_id", ""),
    }


def audit_arguments(arguments: Any, *, secret_names: frozenset[str] = frozenset()) -> Any:
    """Tool arguments as the audit trail keeps them: secrets replaced, long values cut short."""
    return _redact(arguments, secret_names, depth=0)


def _redact(value: Any, secret_names: frozenset[str], *, depth: int) -> Any:
    if depth >= _MAX_DEPTH:
        return "…"
    if isinstance(value, Mapping):
        return {
            str(key): REDACTED
            if str(key) in secret_names or _SECRET_NAME.search(str(key))
            else _redact(item, secret_names, depth=depth + 1)
            for key, item in list(value.items())[:_MAX_ITEMS]
        }
    if isinstance(value, list | tuple):
        return [_redact(item, secret_names, depth=depth + 1) for item in value[:_MAX_ITEMS]]
    if isinstance(value, str) and len(value) > _MAX_STRING:
        return value[:_MAX_STRING] + "…"
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)[:_MAX_STRING]


def audit_enabled() -> bool:
    return gatehouse_settings.GATEHOUSE_AUDIT


def audit_record(
    *,
    action: AuditAction,
    outcome: AuditOutcome = AuditOutcome.OK,
    user: Any = None,
    username: str = "",
    tenant: Any = None,
    application: Any = None,
    identity: Identity | None = None,
    session_id: str = "",
    target: str = "",
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Record an event now, in the caller's transaction (synchronous code: views, services).

    Who acted is given either as model instances (``user``, ``tenant``, ``application``) or as an
    MCP caller's ``identity``.
    """
    entry = audit_entry_sync(
        action=action,
        outcome=outcome,
        user=user,
        username=username,
        tenant=tenant,
        application=application,
        identity=identity,
        session_id=session_id,
        target=target,
        detail=detail,
    )
    metrics_observe(entry)
    audit_write(entry)


def audit_entry_sync(
    *,
    action: AuditAction,
    outcome: AuditOutcome = AuditOutcome.OK,
    user: Any = None,
    username: str = "",
    tenant: Any = None,
    application: Any = None,
    identity: Identity | None = None,
    session_id: str = "",
    target: str = "",
    detail: Mapping[str, Any] | None = None,
) -> AuditEntry:
    """The event ``audit_record`` would write, for callers that decide how to write it."""
    who = (
        _who_from_identity(identity)
        if identity is not None
        else _who_from_models(user=user, username=username, tenant=tenant, application=application)
    )
    return _entry(
        action=action, outcome=outcome, who=who, session_id=session_id, target=target, detail=detail
    )


def audit_write(entry: AuditEntry) -> None:
    """Write ``entry`` in the caller's transaction (no metrics: the caller counted it).

    Each statement has its own savepoint, so a refused row never breaks the caller's transaction;
    a row the database refuses is stored degraded (``core.audit.store``), and with the database
    unreachable the row is spooled."""
    if not audit_enabled():
        return
    try:
        audit_rows_insert([entry])
    except UNAVAILABLE:
        audit_spool_append([entry])
        return
    except TransactionManagementError:
        # The caller's transaction already failed: the event must not share its fate.
        audit_spool_append([entry])
        return
    audit_spool_replay_soon()


class _GroupCommitWriter:
    """Batches the rows of concurrent requests into one INSERT; each caller waits for its batch.

    A batch is flushed to disk before its callers go on if any of its rows asks for it."""

    def __init__(self) -> None:
        self._pending: list[tuple[AuditEntry, bool, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def write(self, entry: AuditEntry, *, flushed: bool) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((entry, flushed, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        # The caller may be cancelled (client gone); the row is still written.
        await asyncio.shield(done)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                await self._store(
                    [entry for entry, _, _ in batch], flushed=any(flushed for _, flushed, _ in batch)
                )
            finally:
                for _, _, done in batch:
                    if not done.done():
                        done.set_result(None)

    @staticmethod
    async def _store(entries: list[AuditEntry], *, flushed: bool) -> None:
        try:
            # core.db sweeps dead connections and retries once on a fresh one before giving up.
            native = hot_path_raw()
            execute = hot_path_execute_raw if native else hot_path_execute
            await audit_rows_insert_async(entries, execute=execute, flushed=flushed, native=native)
        except UNAVAILABLE:
            # The call itself already happened: keep its row on disk until the database is back.
            await asyncio.to_thread(audit_spool_append, entries)
            return
        except Exception:
            # Not the database's absence, and not a row it refused: a fault of ours. Never lose
            # the rows for it.
            logger.exception("Audit batch of %d rows could not be stored; spooling it.", len(entries))
            await asyncio.to_thread(audit_spool_append, entries)
            return
        audit_spool_replay_soon()


_writer = _GroupCommitWriter()


async def audit_record_async(entry: AuditEntry, *, flushed: bool = True) -> None:
    """Record an MCP event; returns once its row is committed (or, if the database is away, spooled).

    Committed means on disk; with ``flushed=False`` (a read-only call that succeeded) it means in
    the table, visible to every reader, and on disk within PostgreSQL's WAL writer delay
    (``core.audit.store.insert_sql``)."""
    metrics_observe(entry)
    await audit_write_async(entry, flushed=flushed)


async def audit_write_async(entry: AuditEntry, *, flushed: bool = True) -> None:
    """Write ``entry`` through the group commit (no metrics: the caller counted it)."""
    if audit_enabled():
        await _writer.write(entry, flushed=flushed)

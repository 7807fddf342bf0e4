"""The audit trail: one ``AuditEvent`` row per thing an operator may need to account for.

Two ways in:

* ``audit_record``, synchronous, through the ORM: pages and OAuth endpoints (login, consent,
  registration, tokens) and session changes, which are rare and already on a database thread. It
  writes in the caller's transaction, so the event and what it records commit together.
* ``audit_record_async``, for the MCP endpoint's tool calls and resource reads. Every call waits
  until its row is committed before its response is sent (a successful call is never left
  unaudited), but concurrent calls share one multi-row INSERT on the endpoint's own async pool
  ("group commit"), so the cost per call shrinks as load grows.

Request id and client address come from the request context (``core.request_context``); every
event also feeds the Prometheus counters (``core.metrics``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from django.db import connection

from core.audit_entry import AuditEntry
from core.conf import gatehouse_settings
from core.db import hot_path_execute
from core.identity import Identity
from core.metrics import metrics_observe
from core.models import AuditAction, AuditEvent, AuditOutcome
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
_FLUSH_RETRIES = 2
# Rows per INSERT: bounds the statement's size and the number of distinct statements prepared.
_MAX_BATCH = 500


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
        "application_id": identity.application_id,
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
    who = (
        _who_from_identity(identity)
        if identity is not None
        else _who_from_models(user=user, username=username, tenant=tenant, application=application)
    )
    entry = _entry(
        action=action, outcome=outcome, who=who, session_id=session_id, target=target, detail=detail
    )
    metrics_observe(entry)
    if audit_enabled():
        AuditEvent.objects.create(**_model_fields(entry))


def _model_fields(entry: AuditEntry) -> dict[str, Any]:
    fields = asdict(entry)
    fields.pop("tenant_slug")
    fields["detail"] = dict(entry.detail)
    return fields


_COLUMNS = (
    "created", "action", "outcome", "tenant_id", "user_id", "username", "application_id", "client_id",
    "session_id", "request_id", "ip", "target", "duration_ms", "detail",
)  # fmt: skip


@functools.cache
def _insert_sql(rows: int) -> str:
    """One INSERT for ``rows`` events: one statement and one round trip, whatever the batch size."""
    on_postgresql = connection.vendor == "postgresql"
    casts = {"ip": "::inet", "detail": "::jsonb"} if on_postgresql else {}
    values = "(" + ", ".join(f"%s{casts.get(column, '')}" for column in _COLUMNS) + ")"
    # The table name comes from the model, never from input; every value is a bound parameter.
    return (
        f"INSERT INTO {AuditEvent._meta.db_table} ({', '.join(_COLUMNS)}) "  # noqa: S608
        f"VALUES {', '.join([values] * rows)}"
    )


def _row(entry: AuditEntry) -> tuple[Any, ...]:
    return (
        entry.created, entry.action, entry.outcome, entry.tenant_id, entry.user_id, entry.username,
        entry.application_id, entry.client_id, entry.session_id, entry.request_id, entry.ip,
        entry.target, entry.duration_ms, json.dumps(entry.detail, default=str),
    )  # fmt: skip


class _GroupCommitWriter:
    """Batches the rows of concurrent requests into one INSERT; each caller waits for its batch."""

    def __init__(self) -> None:
        self._pending: list[tuple[AuditEntry, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def write(self, entry: AuditEntry) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((entry, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        # The caller may be cancelled (client gone); the row is still written.
        await asyncio.shield(done)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:_MAX_BATCH], self._pending[_MAX_BATCH:]
            await self._insert([entry for entry, _ in batch])
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    @staticmethod
    async def _insert(entries: list[AuditEntry]) -> None:
        params = [value for entry in entries for value in _row(entry)]
        for attempt in range(1, _FLUSH_RETRIES + 1):
            try:
                await hot_path_execute(_insert_sql(len(entries)), params)
                return
            except Exception:
                if attempt < _FLUSH_RETRIES:
                    continue
                # The database refused twice. The call itself already happened: keep the events in
                # the structured log (one JSON line each) rather than failing a finished call.
                for entry in entries:
                    logger.exception("Audit event not stored; kept here instead: %s", _as_log(entry))


def _as_log(entry: AuditEntry) -> str:
    return json.dumps({**asdict(entry), "created": entry.created.isoformat()}, default=str)


_writer = _GroupCommitWriter()


async def audit_record_async(entry: AuditEntry) -> None:
    """Record an MCP event; returns once its row is committed (or, if the database is away, logged)."""
    metrics_observe(entry)
    if audit_enabled():
        await _writer.write(entry)

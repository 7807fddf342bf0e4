"""The change log: what a tenant's MCP clients are told of, written once, heard by every worker.

A change (a toolset turned on or off, an upstream server's lists, an ontology edited) is a row of
``ChangeEvent``. On PostgreSQL a trigger on the log sends it with ``NOTIFY`` once the write commits
(migration 0015), to the worker holding each client's stream (``list_changes``); its id, sealed for
the tenant (``event_ids``), is the SSE event id of the standalone stream, so a client that
reconnects with ``Last-Event-ID`` is told what
it missed (``change_log_since``). Toolset changes are written by a trigger on their own table, so
the admin, ``manage.py toolsets`` and SQL all count; what only Python knows (an upstream's
notification, the URIs an ontology's edit touches) is written by ``change_record``.

On SQLite (one process, no ``NOTIFY``) the row is written all the same, and handed to this process's
streams once the transaction commits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from mcp_gateway.models import CHANGE_LOG_KEEP_HOURS, RESOURCE_URI_MAX_LENGTH, ChangeEvent, ChangeKind

logger = logging.getLogger(__name__)

# A reconnecting client is told at most this many missed changes one by one; past it, that
# everything changed (one refetch of each list).
REPLAY_MAX = 500


@dataclass(frozen=True, slots=True)
class Change:
    """One change as the streams see it; ``id`` is None for one that was never logged (a change of
    the identity a stream rests on, heard from ``identity_cache``'s channel)."""

    id: int | None
    tenant_id: int
    kind: str
    toolset: str = ""
    uri: str = ""


# SQLite only: where this process's streams hear a change (set by ``list_changes``).
local_listeners: list[Callable[[Change], None]] = []


def change_record(*, tenant_id: int, kind: ChangeKind, toolset: str = "", uri: str = "") -> None:
    """Log one change; every worker's streams of ``tenant_id`` hear it once the transaction
    commits. A URI too long to keep is cut to nothing (a resource whose URI is that long has no
    subscriber: ``resource_subscriptions`` refuses it)."""
    if len(uri) > RESOURCE_URI_MAX_LENGTH:
        logger.warning("Not logging a change of a resource with a %d-character URI", len(uri))
        return
    event = ChangeEvent.objects.create(tenant_id=tenant_id, kind=kind, toolset=toolset, uri=uri)
    if connection.vendor != "postgresql":
        change = _as_change(event)
        transaction.on_commit(lambda: [listener(change) for listener in list(local_listeners)])


def change_get(*, change_id: int) -> Change | None:
    """One logged change (a notification whose URI was too long to carry is read back here)."""
    event = ChangeEvent.objects.filter(pk=change_id).first()
    return _as_change(event) if event is not None else None


def change_log_since(*, tenant_id: int, after_id: int) -> list[Change] | None:
    """``tenant_id``'s changes logged after ``after_id``, oldest first; None when the log cannot
    say (``after_id`` is older than what is kept, or more than ``REPLAY_MAX`` changed since)."""
    oldest = ChangeEvent.objects.order_by("id").values_list("id", flat=True).first()
    if oldest is not None and after_id < oldest - 1:
        return None
    events = list(
        ChangeEvent.objects.filter(tenant_id=tenant_id, id__gt=after_id).order_by("id")[: REPLAY_MAX + 1]
    )
    if len(events) > REPLAY_MAX:
        return None
    return [_as_change(event) for event in events]


def change_log_latest() -> int:
    """The newest change's id (0 when none): where a stream's event ids start."""
    return ChangeEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def change_log_purge() -> int:
    """Forget changes older than a reconnecting client can ask for."""
    cutoff = timezone.now() - timedelta(hours=CHANGE_LOG_KEEP_HOURS)
    # The newest row stays whatever its age: it tells ``change_log_since`` where the log begins.
    newest = change_log_latest()
    deleted, _ = ChangeEvent.objects.filter(created__lt=cutoff, id__lt=newest).delete()
    return deleted


def _as_change(event: ChangeEvent) -> Change:
    return Change(
        id=event.pk, tenant_id=event.tenant_id, kind=event.kind, toolset=event.toolset, uri=event.uri
    )

"""Refusals counted, not written one by one: a flood of them cannot bloat the audit trail.

``audit_refusal_record_async(entry, key=...)`` (MCP endpoint) and ``audit_refusal_record(key=...,
**audit_record's arguments)`` (synchronous views) record a refusal the way ``audit_record[_async]``
would, except that refusals of the same key in the same window share rows. The key is who was
refused (the user, else the username given, else the client address), ``entry.action`` and the
caller's ``key`` (the limit or the reason refused: ``"tool:whoami"``, ``"login"``), and the window
is ``AUDIT_REFUSAL_WINDOW_SECONDS`` (a minute by default), aligned to the clock; 0 turns counting
off, so every refusal is its own row (the end-to-end suite's shared servers, whose tests each look
for their own request's row).

* The first refusal of a key in a window is written at once, with all its detail, exactly as
  ``audit_record`` would (the MCP caller waits for its row) plus ``detail["count"] = 1``.
* Later refusals of that key in that window are counted in memory. When the window ends (or the
  process exits), one more row is written for them: the last refusal's detail, with
  ``detail["count"]`` the number of refusals it stands for, ``detail["aggregated"] = true`` and
  ``detail["firstAt"]``/``detail["lastAt"]``.

So a key gives at most two rows per window in each process, and the counts of its rows add up to
its refusals. Every refusal still feeds the metrics as it happens. Rows are written as all audit
rows are: made storable, spooled when the database is away. A process killed with SIGKILL loses
the counts of its current window (its first rows are already written).
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from core.audit.entry import AuditEntry
from core.audit.spool import audit_rows_write
from core.audit.trail import audit_enabled, audit_entry_sync, audit_write, audit_write_async
from core.conf import gatehouse_settings
from core.identity import Identity
from core.metrics import metrics_observe
from core.models import AuditAction, AuditOutcome

COUNT_KEY = "count"
# After a window ends, wait this long for refusals of that window still being recorded.
_SETTLE_SECONDS = 0.5

_Key = tuple[str, int | None, str, str]
logger = logging.getLogger(__name__)


@dataclass
class _Tally:
    window: int
    count: int  # refusals beyond the first, which was written at once
    first: datetime
    latest: AuditEntry


def _who(entry: AuditEntry) -> str:
    if entry.user_id is not None:
        return f"user:{entry.user_id}"
    if entry.username:
        return f"username:{entry.username}"
    return f"address:{entry.ip or 'unknown'}"


class _RefusalTally:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Keyed by (key, window): a window's count stays apart from the next one's until flushed.
        self._tallies: dict[tuple[_Key, int], _Tally] = {}
        self._windows_written: set[tuple[_Key, int]] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def first_of_window(self, entry: AuditEntry, key: str) -> AuditEntry | None:
        """The row to write now for this refusal, or None when it is counted for later. Never
        touches the database itself: the async caller is on the event loop."""
        seconds = gatehouse_settings.AUDIT_REFUSAL_WINDOW_SECONDS
        if seconds == 0:  # counting off: every refusal is its own row
            return dataclasses.replace(entry, detail={**entry.detail, COUNT_KEY: 1})
        window = int(entry.created.timestamp() // seconds)
        slot = ((str(entry.action), entry.tenant_id, _who(entry), key), window)
        with self._lock:
            self._start_flusher()
            if slot not in self._windows_written:
                self._windows_written.add(slot)
                return dataclasses.replace(entry, detail={**entry.detail, COUNT_KEY: 1})
            tally = self._tallies.get(slot)
            if tally is None:
                self._tallies[slot] = _Tally(window, 1, entry.created, entry)
            else:
                tally.count += 1
                tally.latest = entry
        return None

    def flush(self, *, everything: bool = False) -> int:
        """Write the counts of the windows that ended (all of them with ``everything``)."""
        seconds = gatehouse_settings.AUDIT_REFUSAL_WINDOW_SECONDS
        if seconds == 0 and not self._tallies:
            return 0
        current = int(time.time() // max(seconds, 1))
        rows: list[AuditEntry] = []
        with self._lock:
            for slot, tally in list(self._tallies.items()):
                if everything or slot[1] < current:
                    rows.append(_aggregated_row(tally, key=slot[0][3], seconds=seconds))
                    del self._tallies[slot]
            self._windows_written = {slot for slot in self._windows_written if slot[1] >= current}
        audit_rows_write(rows)
        return len(rows)

    def _start_flusher(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="audit-refusal-flusher", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            seconds = gatehouse_settings.AUDIT_REFUSAL_WINDOW_SECONDS
            wait = seconds - (time.time() % seconds) + _SETTLE_SECONDS
            if self._wake.wait(wait):
                return
            try:
                self.flush()
            except Exception:
                logger.exception("Refusal counts could not be written; trying again next window.")
            finally:
                # This thread's own connection: not held between windows.
                connection.close()

    def stop(self) -> None:
        self._wake.set()
        self.flush(everything=True)


def _aggregated_row(tally: _Tally, *, key: str, seconds: int) -> AuditEntry:
    latest = tally.latest
    return dataclasses.replace(
        latest,
        event_id=uuid.uuid4(),
        detail={
            **latest.detail,
            COUNT_KEY: tally.count,
            "aggregated": True,
            "refusalKey": key,
            "windowSeconds": seconds,
            "firstAt": tally.first.isoformat(),
            "lastAt": latest.created.isoformat(),
        },
    )


_tally = _RefusalTally()


@atexit.register
def _flush_at_exit() -> None:
    if audit_enabled():
        _tally.stop()


def audit_refusals_flush() -> int:
    """Write every count still held, whatever its window (tests, shutdown); the rows written."""
    return _tally.flush(everything=True)


async def audit_refusal_record_async(entry: AuditEntry, *, key: str) -> None:
    """Record a refusal from async code; waits for the row when one is written now."""
    metrics_observe(entry)
    if not audit_enabled():
        return
    first = _tally.first_of_window(entry, key)
    if first is not None:
        await audit_write_async(first)


def audit_refusal_record(
    *,
    key: str,
    action: AuditAction,
    outcome: AuditOutcome = AuditOutcome.DENIED,
    user: Any = None,
    username: str = "",
    tenant: Any = None,
    application: Any = None,
    identity: Identity | None = None,
    session_id: str = "",
    target: str = "",
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Record a refusal from synchronous code; ``audit_record``'s arguments, plus ``key``."""
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
    if not audit_enabled():
        return
    first = _tally.first_of_window(entry, key)
    if first is not None:
        audit_write(first)

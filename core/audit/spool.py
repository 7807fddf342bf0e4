"""The audit spool: rows the database could not take wait in a local file until it can.

When an audit INSERT fails because the database is unreachable (after ``core.db`` swept dead
connections and retried), the rows are appended to this process's file in ``AUDIT_SPOOL_DIR``,
one JSON line each, and the file is fsync'd before the call goes on: an audited call is answered
only once its row is either in the table or on disk. Each spooling logs a warning and counts
``gatehouse_audit_spooled_total``.

Replay (``audit_spool_replay``) inserts every file's rows and then deletes the file. It runs in
the background of any process of the host once a write to the database succeeds again (files a
killed sibling left behind included: the directory is looked at again every
``_SCAN_INTERVAL_SECONDS``), and on demand with ``manage.py audit_spool_replay``. Rows keep their
``event_id``, so replaying a file twice, or a row that had in fact been stored, stores it once;
``gatehouse_audit_spool_replayed_total`` counts the rows replayed and
``gatehouse_audit_spool_backlog`` (read at each scrape) the rows still waiting, counted by
``audit_spool_backlog`` as the operators' dashboard counts them.

A file is locked (``flock``) while it is appended to or replayed, so a writer and a replayer in
different processes never interleave; a writer whose file was replayed away opens a new one.

If the spool cannot be written either (disk full, directory not writable), the row goes to the
log as one JSON line with level ERROR and ``gatehouse_audit_lost_total`` counts it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import IO

from django.db import connection
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core.audit.entry import AuditEntry, entry_storable
from core.audit.store import UNAVAILABLE, audit_rows_insert
from core.conf import gatehouse_settings
from core.metrics import metrics_collector_register

logger = logging.getLogger(__name__)

SPOOL_SUFFIX = ".jsonl"
REJECTED_SUFFIX = ".rejected"
# How often a process looks for files other processes left, and retries after a failed replay.
_SCAN_INTERVAL_SECONDS = 15.0

SPOOLED = Counter("gatehouse_audit_spooled", "Audit rows written to the spool: the database was unreachable.")
REPLAYED = Counter("gatehouse_audit_spool_replayed", "Spooled audit rows replayed into the table.")
LOST = Counter("gatehouse_audit_lost", "Audit rows neither stored nor spooled (kept in the log only).")

_BACKLOG = "gatehouse_audit_spool_backlog"
_BACKLOG_HELP = "Audit rows in the spool, waiting to be replayed."
_FIELDS = {f.name for f in fields(AuditEntry)}


def spool_dir() -> Path:
    return Path(gatehouse_settings.AUDIT_SPOOL_DIR)


def _own_path() -> Path:
    # One file per process: appends never interleave, and a killed process's file is whole lines.
    return spool_dir() / f"audit-{socket.gethostname()}-{os.getpid()}{SPOOL_SUFFIX}"


def _as_line(entry: AuditEntry) -> str:
    values = asdict(entry_storable(entry))
    values["created"] = entry.created.isoformat()
    values["event_id"] = entry.event_id.hex
    return json.dumps(values) + "\n"


def _from_line(line: str) -> AuditEntry:
    values = {key: value for key, value in json.loads(line).items() if key in _FIELDS}
    values["created"] = datetime.fromisoformat(values["created"])
    values["event_id"] = uuid.UUID(hex=values["event_id"])
    return AuditEntry(**values)


class _Spool:
    """This process's spool file, and whether the directory may hold rows to replay."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._path: Path | None = None
        self._replaying = threading.Lock()
        self._next_scan = 0.0

    def append(self, entries: Sequence[AuditEntry]) -> None:
        lines = "".join(_as_line(entry) for entry in entries)
        try:
            with self._lock:
                handle = self._open()
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    if not self._still_linked(handle):
                        # Replayed (and deleted) since we opened it: write to a fresh file.
                        fcntl.flock(handle, fcntl.LOCK_UN)
                        handle.close()
                        self._file = None
                        handle = self._open()
                        fcntl.flock(handle, fcntl.LOCK_EX)
                    handle.write(lines)
                    handle.flush()
                    os.fsync(handle.fileno())
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except OSError:
            LOST.inc(len(entries))
            for line in lines.splitlines():
                logger.exception("Audit event neither stored nor spooled; kept here instead: %s", line)
            return
        SPOOLED.inc(len(entries))
        self._next_scan = 0.0
        logger.warning(
            "Database unreachable: %d audit row(s) spooled to %s, to be replayed when it is back.",
            len(entries),
            self._path,
        )

    def _open(self) -> IO[str]:
        path = _own_path()
        if self._file is None or self._path != path:
            # Rows name people and addresses: readable by the server's own user only.
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._file = os.fdopen(descriptor, "a", encoding="utf-8")
            self._path = path
        return self._file

    def _still_linked(self, handle: IO[str]) -> bool:
        try:
            return os.stat(str(self._path)).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            return False

    def replay_soon(self) -> None:
        """After a write succeeded: replay in the background if the directory may hold rows."""
        now = time.monotonic()
        if now < self._next_scan or self._replaying.locked():
            return
        self._next_scan = now + _SCAN_INTERVAL_SECONDS
        if not any(_spool_files()):
            return
        threading.Thread(target=self._replay_in_background, name="audit-spool-replay", daemon=True).start()

    def _replay_in_background(self) -> None:
        if not self._replaying.acquire(blocking=False):
            return
        try:
            audit_spool_replay()
        except Exception:
            logger.exception("Audit spool replay failed; it will be tried again.")
        finally:
            self._replaying.release()
            connection.close()


_spool = _Spool()


def _spool_files(directory: Path | None = None) -> Iterator[Path]:
    directory = directory or spool_dir()
    if not directory.is_dir():
        return iter(())
    return iter(sorted(directory.glob(f"*{SPOOL_SUFFIX}")))


def audit_spool_append(entries: Sequence[AuditEntry]) -> None:
    """Keep ``entries`` on disk (fsync'd) until the database takes them. Never raises."""
    _spool.append(entries)


def audit_spool_replay_soon() -> None:
    """Called after a successful write; cheap unless there is something to replay."""
    _spool.replay_soon()


def audit_rows_write(entries: Sequence[AuditEntry]) -> None:
    """Store ``entries`` now (synchronous code, autocommit), or spool them. Never raises."""
    if not entries:
        return
    try:
        audit_rows_insert(entries)
    except UNAVAILABLE:
        audit_spool_append(entries)
        return
    except Exception:
        # Not the database's absence, and not a row it refused: a fault of ours. Keep the rows.
        logger.exception("Audit rows could not be stored; spooling them.")
        audit_spool_append(entries)
        return
    audit_spool_replay_soon()


def audit_spool_pending(*, directory: Path | None = None) -> int:
    """How many spool files wait in ``directory`` (``AUDIT_SPOOL_DIR`` by default)."""
    return len(list(_spool_files(directory)))


@dataclass(frozen=True)
class SpoolBacklog:
    """The rows waiting in a spool directory: its files read, their lines, and the files that could
    not be read (another user's process wrote them)."""

    directory: str
    files: int
    rows: int
    unreadable: int


def audit_spool_backlog(*, directory: Path | None = None) -> SpoolBacklog:
    """Count the rows waiting in ``directory`` (``AUDIT_SPOOL_DIR`` by default), every process's
    files: one line is one row. A missing directory is an empty spool."""
    directory = directory or spool_dir()
    files = rows = unreadable = 0
    for path in _spool_files(directory):
        try:
            with path.open("rb") as handle:
                rows += sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 16), b""))
        except FileNotFoundError:
            continue  # replayed (and deleted) while we looked
        except OSError:
            unreadable += 1
            continue
        files += 1
    return SpoolBacklog(directory=str(directory), files=files, rows=rows, unreadable=unreadable)


def audit_spool_replay(*, directory: Path | None = None) -> int:
    """Insert every spooled row and delete the files replayed; the number of rows newly stored.

    ``directory`` is ``AUDIT_SPOOL_DIR`` unless given (a directory copied from another host).
    Stops at the first file the database cannot take (unreachable again): that file and the ones
    after it stay for the next replay. A file another process holds locked is left for later."""
    stored = 0
    for path in _spool_files(directory):
        try:
            handle = path.open("r+", encoding="utf-8")
        except FileNotFoundError:
            continue  # another process replayed it just now
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            if not path.exists():
                continue
            entries = list(_entries(handle.read().splitlines(), path))
            try:
                inserted = audit_rows_insert(entries)
            except UNAVAILABLE:
                logger.warning("Audit spool replay stopped: the database is unreachable again.")
                break
            path.unlink()
        stored += inserted
        REPLAYED.inc(inserted)
        logger.info(
            "Audit spool %s replayed: %d row(s) stored, %d already there.",
            path.name,
            inserted,
            len(entries) - inserted,
        )
    return stored


def _entries(lines: Iterable[str], path: Path) -> Iterator[AuditEntry]:
    for line in lines:
        if not line.strip():
            continue
        try:
            yield _from_line(line)
        except (ValueError, TypeError, KeyError):
            # A torn last line (the process died mid-write) or a hand-edited one: set it aside.
            with path.with_suffix(REJECTED_SUFFIX).open("a", encoding="utf-8") as rejected:
                rejected.write(line + "\n")
            logger.error("Audit spool %s: unreadable line set aside in %s.", path.name, REJECTED_SUFFIX)


class _BacklogCollector(Collector):
    """Rows waiting in the spool directory, counted at each scrape (every process's files)."""

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Registration asks what this collects: say so without reading the directory.
        yield GaugeMetricFamily(_BACKLOG, _BACKLOG_HELP)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(_BACKLOG, _BACKLOG_HELP, value=audit_spool_backlog().rows)


metrics_collector_register(_BacklogCollector())

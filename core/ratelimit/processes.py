"""A warning at start when several processes count rate limits alone.

Without a shared storage (``REDIS_URL`` unset: ``memory://``) each process keeps its own counts, so
N processes allow N times every limit. That is fine for the embedded single-process default
(SQLite), and wrong as soon as a second process serves the same PostgreSQL database.

How a process knows it is not alone: each one takes a shared PostgreSQL advisory lock on a
connection of its own, held for the life of the process, and counts the holders in ``pg_locks``;
more than itself, and it warns. PostgreSQL drops a session's locks the moment the session ends, so a
process that crashed, was killed or lost its connection is never counted: no false warning after a
crash, unlike a heartbeat row, which outlives its process until a timeout calls it stale (and would
need a table). Two processes starting at the same moment may both warn, rightly. The one way to
miss a warning: a holder whose connection is cut while it runs stops being counted.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from django.db import DatabaseError, connection

from core.conf import gatehouse_settings
from core.ratelimit.storage import rate_limit_storage_shared

logger = logging.getLogger("core.ratelimit.limits")

# The advisory lock's two keys: constants no other code of ours uses ("GHRL", "proc").
ADVISORY_LOCK_KEYS = (0x4748524C, 0x70726F63)
_HOLDERS = """
    SELECT count(*) FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = %s AND objid = %s
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
SEVERAL_PROCESSES = (
    "Rate limits are counted per process: REDIS_URL is not set and {others} other Gatehouse "
    "process(es) serve this database, so each process allows the full limit. Set REDIS_URL to "
    "share the counts."
)

# The connection that holds the lock: kept for the life of the process, never used for anything else.
_holder: Any = None


def rate_limit_processes_check() -> None:
    """Warn when this process counts limits alone and another one serves the same database.
    Called once at start by the server entry point; never raises (a warning is not worth a start)."""
    global _holder
    shared = rate_limit_storage_shared(gatehouse_settings.RATE_LIMIT_STORAGE_URL)
    if _holder is not None or shared or connection.vendor != "postgresql":
        return
    try:
        holder = connection.get_new_connection(connection.get_connection_params())
        holder.autocommit = True
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock_shared(%s, %s)", ADVISORY_LOCK_KEYS)
            cursor.execute(_HOLDERS, ADVISORY_LOCK_KEYS)
            (holders,) = cursor.fetchone()
    except (DatabaseError, psycopg.Error, OSError) as error:
        logger.info("Could not check for other processes counting rate limits alone: %s", error)
        return
    _holder = holder
    if holders > 1:
        logger.warning(SEVERAL_PROCESSES.format(others=holders - 1))

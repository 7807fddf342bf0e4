"""A warning at start when several processes count rate limits alone.

Without a shared storage (``REDIS_URL`` unset: ``memory://``) each process keeps its own counts, so
N processes allow N times every limit. That is fine for the embedded single-process default
(SQLite), and wrong as soon as a second process serves the same PostgreSQL database.

How a process knows it is not alone: each one tries to take a session-level PostgreSQL advisory
lock on a connection of its own, held for the life of the process. The first takes it; any other
fails to, and warns. PostgreSQL releases the lock the moment its session ends, so a process that
crashed, was killed or lost its connection never leaves a lock behind: no false warning after a
crash, unlike a heartbeat row, which outlives its process until a timeout says it is stale (and
would need a table). The price is the other way round: if the holder's connection is cut while it
runs, a process started later does not warn (a missed warning, never a false one).
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from django.db import DatabaseError, connection

from core.conf import gatehouse_settings
from core.ratelimit import rate_limit_storage_shared

logger = logging.getLogger("core.ratelimit")

# pg_try_advisory_lock's key: any constant no other code of ours uses; spells "GHRATEL1".
ADVISORY_LOCK_KEY = 0x4748524154454C31
SEVERAL_PROCESSES = (
    "Rate limits are counted per process: REDIS_URL is not set and another Gatehouse process "
    "already serves this database, so each process allows the full limit. Set REDIS_URL to share "
    "the counts."
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
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [ADVISORY_LOCK_KEY])
            (first,) = cursor.fetchone()
    except (DatabaseError, psycopg.Error, OSError) as error:
        logger.info("Could not check for other processes counting rate limits alone: %s", error)
        return
    if first:
        _holder = holder
        return
    holder.close()
    logger.warning(SEVERAL_PROCESSES)

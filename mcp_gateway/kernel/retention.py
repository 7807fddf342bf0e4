"""Keeping the operational tables small in one sweep (``manage.py purge``): idle and old MCP sessions
(``sessions.session_purge``) and audit rows past retention (``core.audit.retention``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from core.audit.retention import audit_purge, audit_purge_count, audit_retention_cutoff
from mcp_gateway.kernel.sessions import session_purge


@dataclass(frozen=True, slots=True)
class PurgeCounts:
    sessions_ended: int
    sessions_deleted: int
    audit_deleted: int


def retention_purge(*, dry_run: bool = False) -> PurgeCounts:
    """End idle sessions, delete ended ones and audit rows past retention (or only count them)."""
    cutoff = audit_retention_cutoff()
    if dry_run:
        # session_purge decides what is idle or old; running it and rolling back reports exactly
        # what it would do, without a second copy of its rules.
        with transaction.atomic():
            ended, deleted = session_purge()
            transaction.set_rollback(True)
        return PurgeCounts(ended, deleted, audit_purge_count(before=cutoff))
    ended, deleted = session_purge()
    return PurgeCounts(ended, deleted, audit_purge(before=cutoff))

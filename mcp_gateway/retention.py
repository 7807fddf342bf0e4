"""Keeping the operational tables small: sessions (``sessions.session_purge``) and the audit trail.

The audit table can hold millions of rows, so old rows go in batches, each its own short
transaction: a purge never holds one huge lock or transaction while the endpoint keeps writing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from mcp_gateway.models import AuditEvent
from mcp_gateway.sessions import session_purge

AUDIT_PURGE_BATCH = 5000


@dataclass(frozen=True, slots=True)
class PurgeCounts:
    sessions_ended: int
    sessions_deleted: int
    audit_deleted: int


def audit_retention_cutoff() -> datetime:
    return timezone.now() - timedelta(days=settings.GATEHOUSE["AUDIT_RETENTION_DAYS"])


def audit_purge_count(*, before: datetime) -> int:
    return AuditEvent.objects.filter(created__lt=before).count()


def audit_purge(*, before: datetime, batch_size: int = AUDIT_PURGE_BATCH) -> int:
    """Delete audit rows created before ``before``, ``batch_size`` at a time. Returns how many."""
    deleted = 0
    while True:
        batch = AuditEvent.objects.filter(created__lt=before).order_by("pk").values("pk")[:batch_size]
        with transaction.atomic():
            count, _ = AuditEvent.objects.filter(pk__in=batch).delete()
        deleted += count
        if count < batch_size:
            return deleted


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

"""Audit rows past ``AUDIT_RETENTION_DAYS`` go, in batches.

The audit table can hold millions of rows, so old rows go in batches, each its own short
transaction: a purge never holds one huge lock or transaction while the endpoint keeps writing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from core.conf import gatehouse_settings
from core.models import AuditEvent

AUDIT_PURGE_BATCH = 5000


def audit_retention_cutoff() -> datetime:
    return timezone.now() - timedelta(days=gatehouse_settings.AUDIT_RETENTION_DAYS)


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

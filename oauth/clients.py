"""Registered clients nobody ever used: dynamic registrations and metadata documents that never got
as far as a token, deleted after ``OAUTH_UNUSED_CLIENT_DAYS`` (``manage.py
purge_unused_clients``). Registration is open to anyone, so without this the table only grows.

"Used" means a grant, a token (not DOT's RFC 7592 registration-management token, which every
dynamic registration gets), a refresh token (live or revoked), or a token-issued event in the audit
trail, which outlives tokens that ``cleartokens`` removed. Manually created clients are never
touched: an operator made them on purpose.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from oauth2_provider.models import Application
from oauth2_provider.settings import oauth2_settings

from core.audit.trail import audit_record
from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.models import AccessToken, Grant, RefreshToken

logger = logging.getLogger(__name__)

PURGEABLE_SOURCES = (Application.RegistrationSource.DCR, Application.RegistrationSource.CIMD)


@dataclass(frozen=True, slots=True)
class PurgedClient:
    client_id: str
    name: str
    registration_source: str
    created: datetime


def unused_clients_select(*, older_than: datetime) -> QuerySet[Application]:
    """Registered (not manual) clients created before ``older_than`` that never got a token."""
    application = OuterRef("pk")
    user_tokens = AccessToken.objects.filter(application=application).exclude(
        scope=oauth2_settings.DCR_REGISTRATION_SCOPE
    )
    issued = AuditEvent.objects.filter(
        Q(application=application) | Q(client_id=OuterRef("client_id")),
        action__in=(AuditAction.TOKEN_ISSUED, AuditAction.TOKEN_REFRESHED),
        outcome=AuditOutcome.OK,
    )
    return (
        Application.objects.filter(registration_source__in=PURGEABLE_SOURCES, created__lt=older_than)
        .exclude(Exists(Grant.objects.filter(application=application)))
        .exclude(Exists(user_tokens))
        .exclude(Exists(RefreshToken.objects.filter(application=application)))
        .exclude(Exists(issued))
        .order_by("created")
    )


@transaction.atomic
def unused_clients_purge(*, days: int, dry_run: bool = False) -> list[PurgedClient]:
    cutoff = timezone.now() - timedelta(days=days)
    # Locked, so a client that gets its first token while we decide is not deleted under it.
    unused = unused_clients_select(older_than=cutoff).select_for_update(skip_locked=True)
    purged = [
        PurgedClient(
            client_id=application.client_id,
            name=application.name,
            registration_source=application.registration_source,
            created=application.created,
        )
        for application in unused
    ]
    if dry_run:
        return purged
    for client in purged:
        # Written before the delete, which empties the row's link; the client id stays as text.
        audit_record(
            action=AuditAction.CLIENT_DELETED,
            target=client.name,
            detail={
                "client_id": client.client_id,
                "registration_source": client.registration_source,
                "reason": f"never used within {days} days",
            },
        )
    Application.objects.filter(client_id__in=[client.client_id for client in purged]).delete()
    for client in purged:
        logger.info(
            "Deleted unused OAuth client %s (%s, registered %s)",
            client.client_id,
            client.registration_source,
            client.created.isoformat(),
            extra={"client_id": client.client_id, "event": "client.purged"},
        )
    return purged

"""MCP sessions as database rows: open, resume, terminate, purge.

Resuming costs one query; ``last_seen`` is written at most once a minute per session, so a busy
session does not turn every call into a write.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from mcp_gateway.identity import Identity
from mcp_gateway.models import McpSession, TerminationReason

TOUCH_INTERVAL = timedelta(seconds=60)


def _idle_limit() -> timedelta:
    return timedelta(seconds=settings.GATEHOUSE["SESSION_IDLE_SECONDS"])


def session_new_id() -> str:
    # 256 bits from the OS CSPRNG, URL-safe base64: visible ASCII, as the transport spec requires.
    return secrets.token_urlsafe(32)


def session_open(
    *, session_id: str, identity: Identity, protocol_version: str, client_name: str, client_version: str
) -> McpSession:
    return McpSession.objects.create(
        id=session_id,
        user_id=identity.user_id,
        tenant_id=identity.tenant_id,
        application_id=identity.application_id,
        scopes=" ".join(sorted(identity.scopes)),
        protocol_version=protocol_version,
        client_name=client_name[:200],
        client_version=client_version[:100],
        last_seen=timezone.now(),
    )


def session_resume(*, session_id: str, identity: Identity) -> McpSession | None:
    """The caller's live session with this id, or None: unknown, ended, idle too long, or opened by
    another user, tenant or client all look the same from outside (404)."""
    session = McpSession.objects.filter(
        pk=session_id,
        user_id=identity.user_id,
        tenant_id=identity.tenant_id,
        application_id=identity.application_id,
        terminated_at__isnull=True,
    ).first()
    if session is None:
        return None
    now = timezone.now()
    if session.last_seen <= now - _idle_limit():
        session_terminate(session=session, reason=TerminationReason.EXPIRED)
        return None
    if session.last_seen <= now - TOUCH_INTERVAL:
        McpSession.objects.filter(pk=session.pk).update(last_seen=now)
        session.last_seen = now
    return session


def session_terminate(*, session: McpSession, reason: TerminationReason) -> None:
    now = timezone.now()
    McpSession.objects.filter(pk=session.pk, terminated_at__isnull=True).update(
        terminated_at=now, termination_reason=reason
    )
    session.terminated_at, session.termination_reason = now, reason


def session_purge() -> tuple[int, int]:
    """End sessions idle past their lifetime; delete ended ones past retention. Returns (ended, deleted)."""
    now = timezone.now()
    ended = McpSession.objects.filter(terminated_at__isnull=True, last_seen__lte=now - _idle_limit()).update(
        terminated_at=now, termination_reason=TerminationReason.EXPIRED
    )
    retention = timedelta(seconds=settings.GATEHOUSE["SESSION_RETENTION_SECONDS"])
    deleted, _ = McpSession.objects.filter(Q(terminated_at__lte=now - retention)).delete()
    return ended, deleted


def session_set_log_level(*, session_id: str, level: str) -> None:
    McpSession.objects.filter(pk=session_id).update(log_level=level)

"""MCP sessions as database rows: open, resume, terminate, purge.

Resuming costs no query of its own: the hot-path query that authenticates the request also reads
the session (``tokens``). ``last_seen`` is written at most once a minute per session, so a busy
session does not turn every call into a write.

What a client declares in ``initialize`` is kept for the session's life and its retention, so it
is bounded (``MCP_CLIENT_INFO_MAX_BYTES``, ``MCP_CLIENT_CAPABILITIES_MAX_BYTES``) and must be
storable text (``session_client_check``): ten initializes of 3.6 MB each once grew the table by
36 MB in seconds.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.audit.trail import audit_record
from core.conf import gatehouse_settings
from core.errors import InvalidInput, TooManyOpen
from core.identity import Identity
from core.models import AuditAction, AuditOutcome
from core.text_safety import text_unstorable_reason
from mcp_gateway.models import (
    CLIENT_NAME_MAX_LENGTH,
    CLIENT_VERSION_MAX_LENGTH,
    McpSession,
    RelayedMessage,
    TerminationReason,
)

TOUCH_INTERVAL = timedelta(seconds=60)
SESSIONS_PER_PERSON = "sessions_per_person"
TOO_MANY_SESSIONS = (
    "This person has too many open sessions; end one (DELETE it, or on the sessions page) first."
)
RELAYED_MESSAGE_LIFETIME = timedelta(hours=1)


def _idle_limit() -> timedelta:
    return timedelta(seconds=gatehouse_settings.MCP_SESSION_IDLE_SECONDS)


def session_new_id() -> str:
    # 256 bits from the OS CSPRNG, URL-safe base64: visible ASCII, as the transport spec requires.
    return secrets.token_urlsafe(32)


def session_client_check(*, client_info: dict[str, Any], client_capabilities: dict[str, Any]) -> None:
    """Refuse (``InvalidInput``, -32602) a client declaration too large to keep, or unstorable."""
    for name, value, limit in (
        ("clientInfo", client_info, gatehouse_settings.MCP_CLIENT_INFO_MAX_BYTES),
        ("capabilities", client_capabilities, gatehouse_settings.MCP_CLIENT_CAPABILITIES_MAX_BYTES),
    ):
        reason = text_unstorable_reason(value)
        if reason is not None:
            raise InvalidInput(f"{name} {reason}.")
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > limit:
            raise InvalidInput(f"{name} is {size} bytes of JSON; the limit is {limit} bytes.")


def session_open(
    *,
    session_id: str,
    identity: Identity,
    protocol_version: str,
    client_name: str,
    client_version: str,
    client_capabilities: dict[str, Any],
) -> McpSession:
    # Declared by the client, shown on its owner's sessions page and in the audit trail: cut to the
    # columns' lengths (session_client_check has already refused what cannot be stored at all).
    client_name = client_name[:CLIENT_NAME_MAX_LENGTH]
    client_version = client_version[:CLIENT_VERSION_MAX_LENGTH]
    _sessions_per_person_check(identity=identity)
    with transaction.atomic():
        session = McpSession.objects.create(
            id=session_id,
            user_id=identity.user_id,
            tenant_id=identity.tenant_id,
            application_id=identity.application_id,
            scopes=" ".join(sorted(identity.scopes)),
            protocol_version=protocol_version,
            client_name=client_name,
            client_version=client_version,
            client_capabilities=client_capabilities,
            last_seen=timezone.now(),
        )
        audit_record(
            action=AuditAction.SESSION_CREATED,
            identity=identity,
            session_id=session_id,
            target=client_name,
            detail={"protocolVersion": protocol_version, "clientVersion": client_version},
        )
    return session


@dataclass(frozen=True, slots=True)
class LiveSession:
    """A live session as the hot-path query reads it (``tokens``), with the caller's token."""

    id: str
    scopes: frozenset[str]
    protocol_version: str
    last_seen: datetime
    log_level: str = ""
    client_name: str = ""
    client_version: str = ""
    client_capabilities: dict[str, Any] = field(default_factory=dict)


def _sessions_per_person_check(*, identity: Identity) -> None:
    """Refuse a session past the person's bound of live ones (``MCP_SESSIONS_PER_PERSON``), with
    its audit row: sessions one at a time are cheap, a loop of them fills the table."""
    limit = gatehouse_settings.MCP_SESSIONS_PER_PERSON
    live = McpSession.objects.filter(
        user_id=identity.user_id,
        terminated_at__isnull=True,
        last_seen__gt=timezone.now() - _idle_limit(),
    )[:limit].count()
    if live < limit:
        return
    audit_record(
        action=AuditAction.RATE_LIMITED,
        outcome=AuditOutcome.DENIED,
        identity=identity,
        target="initialize",
        detail={"reason": SESSIONS_PER_PERSON, "limit": limit},
    )
    raise TooManyOpen(TOO_MANY_SESSIONS, reason=SESSIONS_PER_PERSON, limit=limit)


def session_is_idle(*, session: LiveSession, now: datetime) -> bool:
    return session.last_seen <= now - _idle_limit()


def session_needs_touch(*, session: LiveSession, now: datetime) -> bool:
    return session.last_seen <= now - TOUCH_INTERVAL


def session_touch(*, session_id: str, now: datetime) -> None:
    McpSession.objects.filter(pk=session_id).update(last_seen=now)


def session_terminate(*, session_id: str, reason: TerminationReason) -> bool:
    """End a live session (once: a second termination is not an event). Returns whether it ended."""
    with transaction.atomic():
        session = (
            McpSession.objects.select_for_update()
            .select_related("user", "tenant", "application")
            .filter(pk=session_id, terminated_at__isnull=True)
            .first()
        )
        if session is None:
            return False
        session.terminated_at = timezone.now()
        session.termination_reason = reason
        session.save(update_fields=["terminated_at", "termination_reason"])
        audit_record(
            action=AuditAction.SESSION_TERMINATED,
            user=session.user,
            tenant=session.tenant,
            application=session.application,
            session_id=session.id,
            target=session.client_name,
            detail={"reason": reason.value},
        )
    return True


def session_terminate_for_inactive_tenants(*, tenant_id: int | None = None) -> int:
    """End the live sessions of deactivated tenants (of one, given ``tenant_id``); returns how many.

    Their tokens are already refused on the next request (``tokens``); this ends the sessions
    themselves, each audited, so that reactivating the tenant does not bring them back.
    """
    live = McpSession.objects.filter(terminated_at__isnull=True, tenant__is_active=False)
    if tenant_id is not None:
        live = live.filter(tenant_id=tenant_id)
    return sum(
        session_terminate(session_id=session_id, reason=TerminationReason.TENANT)
        for session_id in live.values_list("pk", flat=True)
    )


def session_purge() -> tuple[int, int]:
    """End sessions idle past their lifetime (or of a deactivated tenant); delete ended ones past
    retention. Returns (ended, deleted)."""
    now = timezone.now()
    idle = McpSession.objects.filter(terminated_at__isnull=True, last_seen__lte=now - _idle_limit())
    # One by one, so each ending is audited like any other; a sweep finds few at a time.
    ended = sum(
        session_terminate(session_id=session_id, reason=TerminationReason.EXPIRED)
        for session_id in idle.values_list("pk", flat=True)
    )
    # A tenant deactivated by a bulk update (no save signal) is caught here.
    ended += session_terminate_for_inactive_tenants()
    retention = timedelta(seconds=gatehouse_settings.MCP_SESSION_RETENTION_SECONDS)
    # Counted apart from what goes with them (the workflow tools' session bindings).
    _, by_model = McpSession.objects.filter(terminated_at__lte=now - retention).delete()
    deleted = by_model.get(McpSession._meta.label, 0)
    # Answers nobody took (the waiting worker died first) are useless after the call's time limit.
    RelayedMessage.objects.filter(created__lte=now - RELAYED_MESSAGE_LIFETIME).delete()
    return ended, deleted


def session_set_log_level(*, session_id: str, level: str) -> None:
    McpSession.objects.filter(pk=session_id).update(log_level=level)

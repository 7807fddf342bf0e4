"""A person's own view of what they connected: applications (per client and tenant) and live MCP
sessions, and the services that disconnect them.

A connection is a (client, tenant) pair for which the person holds a live token or a remembered
consent. Tokens are read by their owner, tenant, client, scope and times only, never by value
(they may be stored hashed). "Last used" is the latest of the connection's live tokens' ``updated``
(a refresh mints new rows, so it moves whenever the client refreshes) and its MCP sessions'
``last_seen`` (which moves, within a minute, while a session is in use); stand-alone 2026-07-28
requests leave no trace finer than the token's own refresh.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone
from oauth2_provider.models import Application, refresh_token_expire_timedelta

from accounts.models import Tenant, User
from core.conf import gatehouse_settings
from core.errors import NotFound
from core.text_safety import text_is_storable
from mcp_gateway.kernel.sessions import session_terminate
from mcp_gateway.models import SESSION_ID_MAX_LENGTH, McpSession, TerminationReason
from oauth.consent import consent_forget
from oauth.models import AccessToken, RefreshToken, RememberedConsent
from oauth.services import RevokedCounts, access_token_revoke, refresh_token_revoke

# ``detail.by`` of the ``token.revoked`` events a person's own revocation writes.
BY_OWNER = "owner"
NO_CONNECTION = "No such connected application."
NO_SESSION = "No such session."


@dataclass(slots=True)
class Connection:
    application: Application
    tenant: Tenant
    scopes: set[str] = field(default_factory=set)
    last_used: datetime | None = None
    holds_tokens: bool = False
    remembered: bool = False


@dataclass(frozen=True, slots=True)
class Disconnected:
    revoked: RevokedCounts
    sessions_ended: int
    consent_forgotten: bool


def _live_refresh_cutoff(now: datetime) -> datetime | None:
    # DOT refuses a refresh token this long after its access token expired (None: never).
    delta = refresh_token_expire_timedelta()
    return now - delta if delta is not None else None


def connection_list_for_user(*, user: User, now: datetime | None = None) -> list[Connection]:
    """The person's connections, most recently used first."""
    now = now or timezone.now()
    rows: list[tuple[int, int, str, datetime | None, str]] = []
    # Grouped in the database: a client that refreshes often holds many token rows, all with the
    # same few scope strings, and only the latest ``updated`` of each matters here.
    access = AccessToken.objects.filter(user=user, tenant__isnull=False, expires__gt=now)
    rows += [
        (app_id, tenant_id, scope, updated, "token")
        for app_id, tenant_id, scope, updated in access.values_list("application_id", "tenant_id", "scope")
        .annotate(last=Max("updated"))
        .order_by()
    ]
    refresh = RefreshToken.objects.filter(user=user, revoked__isnull=True, access_token__isnull=False)
    cutoff = _live_refresh_cutoff(now)
    if cutoff is not None:
        refresh = refresh.filter(access_token__expires__gt=cutoff)
    rows += [
        (app_id, tenant_id, scope or "", updated, "token")
        for app_id, tenant_id, scope, updated in refresh.values_list(
            "application_id", "tenant_id", "access_token__scope"
        )
        .annotate(last=Max("updated"))
        .order_by()
    ]
    consents = RememberedConsent.objects.filter(user=user)
    rows += [
        (app_id, tenant_id, scopes, None, "consent")
        for app_id, tenant_id, scopes in consents.values_list("application_id", "tenant_id", "scopes")
    ]
    keys = {(app_id, tenant_id) for app_id, tenant_id, *_ in rows if app_id is not None}
    if not keys:
        return []
    applications = Application.objects.in_bulk({app_id for app_id, _ in keys})
    tenants = Tenant.objects.in_bulk({tenant_id for _, tenant_id in keys})
    connections: dict[tuple[int, int], Connection] = {}
    for app_id, tenant_id, scopes, updated, kind in rows:
        if (app_id, tenant_id) not in keys:
            continue
        connection = connections.setdefault(
            (app_id, tenant_id), Connection(application=applications[app_id], tenant=tenants[tenant_id])
        )
        connection.scopes.update(scopes.split())
        connection.holds_tokens |= kind == "token"
        connection.remembered |= kind == "consent"
        connection.last_used = _latest(connection.last_used, updated)
    seen = (
        McpSession.objects.filter(user=user)
        .values_list("application_id", "tenant_id")
        .annotate(last=Max("last_seen"))
    )
    for app_id, tenant_id, last in seen:
        if (app_id, tenant_id) in connections:
            connection = connections[(app_id, tenant_id)]
            connection.last_used = _latest(connection.last_used, last)
    return sorted(
        connections.values(),
        key=lambda c: (
            c.last_used is None,
            -(c.last_used.timestamp() if c.last_used else 0.0),
            c.application.name,
            c.tenant.name,
        ),
    )


def _latest(*moments: datetime | None) -> datetime | None:
    present = [moment for moment in moments if moment is not None]
    return max(present) if present else None


def connection_get(*, user: User, client_id: str, tenant_slug: str) -> Connection:
    """One of the person's connections, or ``NotFound`` (another person's looks like no one's)."""
    for connection in connection_list_for_user(user=user):
        if connection.application.client_id == client_id and connection.tenant.slug == tenant_slug:
            return connection
    raise NotFound(NO_CONNECTION)


@transaction.atomic
def connection_revoke(*, user: User, application: Application, tenant: Tenant) -> Disconnected:
    """Disconnect the client from the person in this tenant: revoke its tokens (audited, through
    the same services the admin uses), end its MCP sessions, and forget the consent so the next
    authorization asks again."""
    counts = RevokedCounts()
    owned = {"user": user, "application": application, "tenant": tenant}
    for refresh in RefreshToken.objects.filter(revoked__isnull=True, **owned).select_related(
        "user", "tenant", "application"
    ):
        counts += refresh_token_revoke(token=refresh, by=BY_OWNER)
    # What is left has no live refresh token: the loop above deleted every bound access token.
    for access in AccessToken.objects.filter(**owned).select_related("user", "tenant", "application"):
        counts += access_token_revoke(token=access, by=BY_OWNER)
    live = McpSession.objects.filter(terminated_at__isnull=True, **owned).values_list("pk", flat=True)
    ended = _sessions_end(session_ids=list(live))
    forgotten = consent_forget(user=user, application=application, tenant=tenant)
    return Disconnected(revoked=counts, sessions_ended=ended, consent_forgotten=forgotten)


def _sessions_end(*, session_ids: Iterable[str]) -> int:
    return sum(session_terminate(session_id=sid, reason=TerminationReason.OWNER) for sid in session_ids)


def _idle_cutoff(now: datetime) -> datetime:
    return now - timedelta(seconds=gatehouse_settings.MCP_SESSION_IDLE_SECONDS)


def _live_sessions(*, user: User, now: datetime) -> QuerySet[McpSession]:
    # What a client could still use: not ended, not idle past the limit (those end as "expired").
    return McpSession.objects.filter(user=user, terminated_at__isnull=True, last_seen__gt=_idle_cutoff(now))


def session_list_for_user(*, user: User, now: datetime | None = None) -> list[McpSession]:
    """The person's MCP sessions a client could still use, most recently seen first."""
    return list(
        _live_sessions(user=user, now=now or timezone.now())
        .select_related("application", "tenant")
        .order_by("-last_seen")
    )


def session_end_for_user(*, user: User, session_id: str) -> McpSession:
    """End one of the person's live sessions, or ``NotFound`` if it is not one of theirs."""
    # A value no session id can be (too long, or holding what PostgreSQL refuses) is nobody's
    # session: answered as such before it reaches the database, which would fail on a NUL.
    if not session_id or len(session_id) > SESSION_ID_MAX_LENGTH or not text_is_storable(session_id):
        raise NotFound(NO_SESSION)
    session = (
        McpSession.objects.select_related("application", "tenant")
        .filter(pk=session_id, user=user, terminated_at__isnull=True)
        .first()
    )
    if session is None or not _sessions_end(session_ids=[session.pk]):
        raise NotFound(NO_SESSION)
    return session


def session_end_all_for_user(*, user: User, now: datetime | None = None) -> int:
    """End every session the person's sessions page lists, each audited as its own ending (as one
    ended by its button is); returns how many ended. Safe to call twice: the second ends none."""
    live = _live_sessions(user=user, now=now or timezone.now()).values_list("pk", flat=True)
    return _sessions_end(session_ids=list(live))

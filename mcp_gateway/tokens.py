"""Resolve a bearer token to an Identity: the hot path of every MCP and REST API request.

Every request checks its token, user, membership and tenant as they are now, so a revoked token,
a disabled account, a removed membership or a deactivated tenant stops the very next request. On
the MCP endpoint the query's answer is kept for a few seconds per worker (``identity_cache``),
forgotten by every worker as soon as PostgreSQL announces a change it depends on; the REST API
asks every time.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from oauth2_provider.models import Application

from accounts.models import Membership, Tenant
from accounts.scopes import scopes_for_role
from core.db import hot_path_fetchone
from core.errors import AuthenticationFailed
from core.identity import Identity
from mcp_gateway.identity_cache import identity_cache
from mcp_gateway.models import McpSession
from mcp_gateway.sessions import LiveSession, session_is_idle, session_needs_touch
from oauth.models import AccessToken
from oauth.resource import issued_for
from oauth.token_storage import token_checksum

TOKEN_UNKNOWN = "The access token is not recognised; it may have been revoked."
TOKEN_EXPIRED = "The access token has expired."
TOKEN_WRONG_RESOURCE = "The access token was not issued for this resource."
TOKEN_USER_INACTIVE = "The account behind this access token is disabled."
TOKEN_NOT_MEMBER = "The account behind this access token is no longer a member of its tenant."
TOKEN_TENANT_INACTIVE = "The tenant of this access token is deactivated."


@functools.cache
def _hot_path_sql() -> str:
    # Table names come from the models, never from input; the one value is a bound parameter.
    token, user, tenant = AccessToken._meta, get_user_model()._meta, Tenant._meta
    application, membership, session = Application._meta, Membership._meta, McpSession._meta
    return (
        "SELECT t.id, t.expires, t.scope, t.resource, "  # noqa: S608
        "u.id, u.username, u.is_active, tn.id, tn.slug, tn.name, tn.is_active, a.id, a.client_id, a.name, "
        f"(SELECT m.role FROM {membership.db_table} m "
        "WHERE m.user_id = t.user_id AND m.tenant_id = t.tenant_id), "
        "s.id, s.scopes, s.protocol_version, s.last_seen, s.log_level, "
        "s.client_name, s.client_version, s.client_capabilities "
        f"FROM {token.db_table} t "
        f"LEFT JOIN {user.db_table} u ON u.id = t.user_id "
        f"LEFT JOIN {tenant.db_table} tn ON tn.id = t.tenant_id "
        f"LEFT JOIN {application.db_table} a ON a.id = t.application_id "
        # The caller's live session, when the request names one: only the user, tenant and client
        # that opened it can find it.
        f"LEFT JOIN {session.db_table} s ON s.id = %s AND s.user_id = t.user_id "
        "AND s.tenant_id = t.tenant_id AND s.application_id = t.application_id AND s.terminated_at IS NULL "
        "WHERE t.token_checksum = %s"
    )


def _identity_from_row(
    row: tuple[Any, ...] | None, *, resource_url: str
) -> tuple[Identity, LiveSession | None]:
    if row is None:
        raise AuthenticationFailed(TOKEN_UNKNOWN)
    (token_id, expires, scope, resource, user_id, username, user_active, tenant_id, tenant_slug, tenant_name,
     tenant_active, application_id, client_id, client_name, role,
     session_key, session_scopes, session_version, session_seen, session_log_level,
     session_client_name, session_client_version, session_capabilities) = row  # fmt: skip
    # For the audit row of a refusal: which token (its row, never its value), whose, for which client.
    known = {"tokenId": token_id, "userId": user_id, "tenantId": tenant_id, "applicationId": application_id}
    expires = _as_datetime(expires)
    if expires <= timezone.now():
        raise AuthenticationFailed(TOKEN_EXPIRED, data=known)
    if isinstance(resource, str):
        resource = json.loads(resource)
    if tenant_id is None or application_id is None or not issued_for(resource, resource_url=resource_url):
        raise AuthenticationFailed(TOKEN_WRONG_RESOURCE, data=known)
    if user_id is None or not user_active:
        raise AuthenticationFailed(TOKEN_USER_INACTIVE, data=known)
    if not tenant_active:
        raise AuthenticationFailed(TOKEN_TENANT_INACTIVE, data=known)
    if role is None:
        raise AuthenticationFailed(TOKEN_NOT_MEMBER, data=known)
    # A role downgrade takes effect at once: the token keeps only what the role still allows.
    scopes = frozenset(scope.split()) & scopes_for_role(role=role)
    identity = Identity(
        user_id=user_id,
        username=username,
        tenant_id=tenant_id,
        tenant_slug=tenant_slug,
        tenant_name=tenant_name,
        role=role,
        scopes=scopes,
        application_id=application_id,
        client_id=client_id,
        client_name=client_name or client_id,
        token_id=token_id,
    )
    session = None
    if session_key is not None:
        session = LiveSession(
            id=session_key,
            scopes=frozenset(session_scopes.split()),
            protocol_version=session_version,
            last_seen=_as_datetime(session_seen),
            log_level=session_log_level or "",
            client_name=session_client_name,
            client_version=session_client_version,
            client_capabilities=(
                json.loads(session_capabilities)
                if isinstance(session_capabilities, str)
                else session_capabilities
            ),
        )
    return identity, session


def _as_datetime(value: datetime | str) -> datetime:
    # PostgreSQL hands back aware datetimes; SQLite, naive UTC text.
    parsed = value if isinstance(value, datetime) else parse_datetime(value)
    if parsed is None:
        raise ValueError(f"not a timestamp: {value!r}")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


async def identity_from_bearer(
    *, raw_token: str, session_id: str | None
) -> tuple[Identity, LiveSession | None]:
    """The caller, and their live session if the request names one: one query.

    The hot path of every MCP request: one hand-written query for the token, its user, tenant and
    client, the caller's role as it is now, and the live session. Through the ORM the same lookup
    cost ~8 ms of Python per request on these machines; as SQL on the async pool (``db``), a
    fraction of a millisecond.
    """
    # The checksum is all the database keeps of a token (oauth.token_storage), and it is indexed;
    # looking up by it also avoids comparing secrets in Python at all.
    checksum = token_checksum(raw_token)
    key = (checksum, session_id or "")
    cached = await identity_cache.get(key)
    if cached is not None:
        identity, session = _identity_from_row(cached, resource_url=settings.MCP_RESOURCE_URL)
        if session is None or not _session_due(session):
            return identity, session
    generation = identity_cache.generation
    row = await hot_path_fetchone(_hot_path_sql(), [session_id or "", checksum])
    identity, session = _identity_from_row(row, resource_url=settings.MCP_RESOURCE_URL)
    # A session id that found no live session is refused; nothing to keep for the next request.
    if row is not None and (session is not None or session_id is None):
        identity_cache.put(key, row, generation=generation, expires=_as_datetime(row[1]), tags=_tags(row))
    return identity, session


def _session_due(session: LiveSession) -> bool:
    """Whether the session's ``last_seen`` decides something now (a touch, or its end): then it is
    read afresh, as another worker may have touched it since it was kept."""
    now = timezone.now()
    return session_needs_touch(session=session, now=now) or session_is_idle(session=session, now=now)


def _tags(row: tuple[Any, ...]) -> frozenset[tuple[str, int | str]]:
    """What the row depends on, as ``identity_cache`` notifications name it."""
    token_id, user_id, tenant_id, application_id, session_key = row[0], row[4], row[7], row[11], row[15]
    tags: set[tuple[str, int | str]] = {
        ("token", token_id),
        ("user", user_id),
        ("tenant", tenant_id),
        ("application", application_id),
    }
    if session_key is not None:
        tags.add(("session", session_key))
    return frozenset(tags)


async def identity_from_api_bearer(*, raw_token: str) -> Identity:
    """The caller of a REST API request: the same query and checks as ``identity_from_bearer``
    (the API has no sessions), for a token bound to the API and nothing else. A person's token
    from the authorization-code flow and a service client's from client credentials resolve alike,
    the latter as the client's own account."""
    row = await hot_path_fetchone(_hot_path_sql(), ["", token_checksum(raw_token)])
    identity, _ = _identity_from_row(row, resource_url=settings.API_RESOURCE_URL)
    return identity

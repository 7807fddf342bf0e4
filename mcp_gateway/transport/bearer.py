"""The MCP endpoint's bearer authentication: ``oauth.bearer``'s query with the caller's live session
read in the same round trip, and the answer kept for a few seconds per worker (``identity_cache``),
forgotten by every worker as soon as PostgreSQL announces a change it depends on.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.utils import timezone

from core.db import hot_path_fetchone
from core.identity import Identity
from mcp_gateway.kernel.identity_cache import identity_cache
from mcp_gateway.kernel.sessions import LiveSession, session_is_idle, session_needs_touch
from mcp_gateway.models import McpSession
from oauth.bearer import IDENTITY_COLUMNS, as_datetime, identity_from_row, identity_sql
from oauth.token_storage import token_checksum


@functools.cache
def _hot_path_sql() -> str:
    # Table names come from the models, never from input; the values are bound parameters.
    session = McpSession._meta.db_table
    return identity_sql(
        extra_columns=", s.id, s.scopes, s.protocol_version, s.last_seen, s.log_level, "
        "s.client_name, s.client_version, s.client_capabilities",
        # The caller's live session, when the request names one: only the user, tenant and client
        # that opened it can find it.
        extra_join=f"LEFT JOIN {session} s ON s.id = %s AND s.user_id = t.user_id "
        "AND s.tenant_id = t.tenant_id AND s.application_id = t.application_id AND s.terminated_at IS NULL",
    )


def _identity_from_row(
    row: tuple[Any, ...] | None, *, resource_url: str
) -> tuple[Identity, LiveSession | None]:
    identity = identity_from_row(row, resource_url=resource_url)
    assert row is not None  # identity_from_row refuses a missing row
    (session_key, session_scopes, session_version, session_seen, session_log_level,
     session_client_name, session_client_version, session_capabilities) = row[IDENTITY_COLUMNS:]  # fmt: skip
    session = None
    if session_key is not None:
        session = LiveSession(
            id=session_key,
            scopes=frozenset(session_scopes.split()),
            protocol_version=session_version,
            last_seen=as_datetime(session_seen),
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


async def identity_from_bearer(
    *, raw_token: str, session_id: str | None
) -> tuple[Identity, LiveSession | None]:
    """The caller, and their live session if the request names one: one query.

    The hot path of every MCP request: one hand-written query for the token, its user, tenant and
    client, the caller's role as it is now, and the live session, as SQL on the async pool (``db``)
    rather than through the ORM, whose Python would cost more than the query (docs/benchmarks.md).
    """
    # The checksum is all the database keeps of a token (oauth.token_storage), and it is indexed;
    # looking up by it also avoids comparing secrets in Python at all.
    checksum = token_checksum(raw_token)
    key = (checksum, session_id or "")
    cached: _Kept | None = await identity_cache.get(key)
    # What was read is kept as read into objects (both immutable); only the token's expiry, the
    # one check of the row that time alone changes, is made again (the entry ends by then anyway).
    if cached is not None and cached.resource_url == settings.MCP_RESOURCE_URL:
        identity, session = cached.identity, cached.session
        if cached.expires > timezone.now() and (session is None or not _session_due(session)):
            return identity, session
    generation = identity_cache.generation
    row = await hot_path_fetchone(_hot_path_sql(), [session_id or "", checksum])
    identity, session = _identity_from_row(row, resource_url=settings.MCP_RESOURCE_URL)
    # A session id that found no live session is refused; nothing to keep for the next request.
    if row is not None and (session is not None or session_id is None):
        expires = as_datetime(row[1])
        kept = _Kept(identity, session, expires, settings.MCP_RESOURCE_URL)
        identity_cache.put(key, kept, generation=generation, expires=expires, tags=_tags(row))
    return identity, session


class _Kept(NamedTuple):
    """The identity cache's entry: the caller and session one row made, and when its token ends."""

    identity: Identity
    session: LiveSession | None
    expires: datetime
    resource_url: str


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

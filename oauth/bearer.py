"""A bearer token resolved to an Identity, as every protected resource checks it: the MCP endpoint
and the REST API alike.

Every request checks its token, user, membership and tenant as they are now, so a revoked token,
a disabled account, a removed membership or a deactivated tenant stops the very next request. One
hand-written query reads them all (``identity_sql``); the MCP endpoint adds its live session to the
same query and keeps answers for a few seconds (``mcp_gateway.transport.bearer``), the REST API
asks every time (``identity_from_api_bearer``).
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
from oauth.models import AccessToken
from oauth.resource import issued_for
from oauth.token_storage import token_checksum

TOKEN_UNKNOWN = "The access token is not recognised; it may have been revoked."
TOKEN_EXPIRED = "The access token has expired."
TOKEN_WRONG_RESOURCE = "The access token was not issued for this resource."
TOKEN_USER_INACTIVE = "The account behind this access token is disabled."
TOKEN_NOT_MEMBER = "The account behind this access token is no longer a member of its tenant."
TOKEN_TENANT_INACTIVE = "The tenant of this access token is deactivated."

# The columns ``identity_from_row`` reads, first in every row ``identity_sql`` selects.
IDENTITY_COLUMNS = 15


def identity_sql(*, extra_columns: str = "", extra_join: str = "") -> str:
    """The query for a token's identity, by ``token_checksum`` (the last bound parameter).

    ``extra_columns`` (with its leading comma) and ``extra_join`` let a resource read what else it
    needs in the same round trip; their tables come from models, never from input."""
    token, user, tenant = AccessToken._meta, get_user_model()._meta, Tenant._meta
    application, membership = Application._meta, Membership._meta
    return (
        "SELECT t.id, t.expires, t.scope, t.resource, "  # noqa: S608
        "u.id, u.username, u.is_active, tn.id, tn.slug, tn.name, tn.is_active, a.id, a.client_id, a.name, "
        f"(SELECT m.role FROM {membership.db_table} m "
        "WHERE m.user_id = t.user_id AND m.tenant_id = t.tenant_id)"
        f"{extra_columns} "
        f"FROM {token.db_table} t "
        f"LEFT JOIN {user.db_table} u ON u.id = t.user_id "
        f"LEFT JOIN {tenant.db_table} tn ON tn.id = t.tenant_id "
        f"LEFT JOIN {application.db_table} a ON a.id = t.application_id "
        f"{extra_join} "
        "WHERE t.token_checksum = %s"
    )


def identity_from_row(row: tuple[Any, ...] | None, *, resource_url: str) -> Identity:
    """The identity in the first ``IDENTITY_COLUMNS`` of ``row``, or ``AuthenticationFailed``
    saying why the token no longer stands for one at ``resource_url``."""
    if row is None:
        raise AuthenticationFailed(TOKEN_UNKNOWN)
    (token_id, expires, scope, resource, user_id, username, user_active, tenant_id, tenant_slug, tenant_name,
     tenant_active, application_id, client_id, client_name, role) = row[:IDENTITY_COLUMNS]  # fmt: skip
    # For the audit row of a refusal: which token (its row, never its value), whose, for which client.
    known = {"tokenId": token_id, "userId": user_id, "tenantId": tenant_id, "applicationId": application_id}
    if as_datetime(expires) <= timezone.now():
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
    return Identity(
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


def as_datetime(value: datetime | str) -> datetime:
    """A timestamp column as an aware datetime: PostgreSQL hands back aware datetimes; SQLite,
    naive UTC text."""
    parsed = value if isinstance(value, datetime) else parse_datetime(value)
    if parsed is None:
        raise ValueError(f"not a timestamp: {value!r}")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


@functools.cache
def _api_sql() -> str:
    return identity_sql()


async def identity_from_api_bearer(*, raw_token: str) -> Identity:
    """The caller of a REST API request, for a token bound to the API and nothing else. A person's
    token from the authorization-code flow and a service client's from client credentials resolve
    alike, the latter as the client's own account."""
    # The checksum is all the database keeps of a token (oauth.token_storage), and it is indexed;
    # looking up by it also avoids comparing secrets in Python at all.
    row = await hot_path_fetchone(_api_sql(), [token_checksum(raw_token)])
    return identity_from_row(row, resource_url=settings.API_RESOURCE_URL)

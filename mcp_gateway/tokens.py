"""Resolve a bearer token to an Identity: the hot path of every MCP request."""

from __future__ import annotations

import hashlib

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from accounts.models import Membership
from accounts.scopes import scopes_for_role
from mcp_gateway.errors import AuthenticationFailed
from mcp_gateway.identity import Identity
from oauth.models import AccessToken
from oauth.resource import is_mcp_resource

TOKEN_UNKNOWN = "The access token is not recognised; it may have been revoked."
TOKEN_EXPIRED = "The access token has expired."
TOKEN_WRONG_RESOURCE = "The access token was not issued for this resource."
TOKEN_USER_INACTIVE = "The account behind this access token is disabled."
TOKEN_NOT_MEMBER = "The account behind this access token is no longer a member of its tenant."


def _issued_for_mcp(resource: object) -> bool:
    return isinstance(resource, list) and bool(resource) and all(is_mcp_resource(r) for r in resource)


def _identity_from_bearer(raw_token: str) -> Identity:
    # MCP requests bypass Django's request signals, which is where stale or broken database
    # connections are normally dropped; do it here, on the thread that runs the queries.
    close_old_connections()
    # DOT indexes sha256(token); looking up by it avoids comparing secrets in Python at all.
    checksum = hashlib.sha256(raw_token.encode("utf-8")).hexdigest()
    current_role = Membership.objects.filter(
        user_id=OuterRef("user_id"), tenant_id=OuterRef("tenant_id"), tenant__is_active=True
    ).values("role")[:1]
    # One query: the token, its user, tenant and client, and the caller's role as it is now.
    token = (
        AccessToken.objects.select_related("user", "tenant", "application")
        .annotate(current_role=Subquery(current_role))
        .filter(token_checksum=checksum)
        .first()
    )
    if token is None:
        raise AuthenticationFailed(TOKEN_UNKNOWN)
    if token.expires <= timezone.now():
        raise AuthenticationFailed(TOKEN_EXPIRED)
    tenant, application = token.tenant, token.application
    if tenant is None or application is None or not _issued_for_mcp(token.resource):
        raise AuthenticationFailed(TOKEN_WRONG_RESOURCE)
    user = token.user
    if user is None or not user.is_active:
        raise AuthenticationFailed(TOKEN_USER_INACTIVE)
    role = token.current_role
    if role is None:
        raise AuthenticationFailed(TOKEN_NOT_MEMBER)
    # A role downgrade takes effect at once: the token keeps only what the role still allows.
    scopes = frozenset(token.scope.split()) & scopes_for_role(role=role)
    return Identity(
        user_id=user.pk,
        username=user.get_username(),
        tenant_id=tenant.pk,
        tenant_slug=tenant.slug,
        tenant_name=tenant.name,
        role=role,
        scopes=scopes,
        application_id=application.pk,
        client_id=application.client_id,
        client_name=application.name or application.client_id,
        token_id=token.pk,
    )


async def identity_from_bearer(*, raw_token: str) -> Identity:
    """One hop to the ORM thread for the whole lookup, rather than one per query."""
    return await sync_to_async(_identity_from_bearer)(raw_token)

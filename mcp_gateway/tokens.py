"""Resolve a bearer token to an Identity: the hot path of every MCP request."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.utils import timezone

from accounts.models import Membership
from accounts.scopes import scopes_for_role
from mcp_gateway.errors import AuthenticationFailed
from mcp_gateway.identity import Identity
from oauth.models import AccessToken

TOKEN_UNKNOWN = "The access token is not recognised; it may have been revoked."
TOKEN_EXPIRED = "The access token has expired."
TOKEN_WRONG_RESOURCE = "The access token was not issued for this resource."
TOKEN_USER_INACTIVE = "The account behind this access token is disabled."
TOKEN_NOT_MEMBER = "The account behind this access token is no longer a member of its tenant."


def _issued_for_mcp(resource: object) -> bool:
    if not isinstance(resource, list) or not resource:
        return False
    return all(isinstance(r, str) and r.rstrip("/") == settings.MCP_RESOURCE_URL for r in resource)


async def identity_from_bearer(*, raw_token: str) -> Identity:
    # DOT indexes sha256(token); looking up by it avoids comparing secrets in Python at all.
    checksum = hashlib.sha256(raw_token.encode("utf-8")).hexdigest()
    token = (
        await AccessToken.objects.select_related("user", "tenant", "application")
        .filter(token_checksum=checksum)
        .afirst()
    )
    if token is None:
        raise AuthenticationFailed(TOKEN_UNKNOWN)
    if token.expires <= timezone.now():
        raise AuthenticationFailed(TOKEN_EXPIRED)
    if token.tenant is None or not _issued_for_mcp(token.resource):
        raise AuthenticationFailed(TOKEN_WRONG_RESOURCE)
    user = token.user
    if user is None or not user.is_active:
        raise AuthenticationFailed(TOKEN_USER_INACTIVE)
    role = (
        await Membership.objects.filter(user_id=user.pk, tenant_id=token.tenant_id, tenant__is_active=True)
        .values_list("role", flat=True)
        .afirst()
    )
    if role is None:
        raise AuthenticationFailed(TOKEN_NOT_MEMBER)
    # A role downgrade takes effect at once: the token keeps only what the role still allows.
    scopes = frozenset(token.scope.split()) & scopes_for_role(role=role)
    application = token.application
    return Identity(
        user_id=user.pk,
        username=user.get_username(),
        tenant_id=token.tenant.pk,
        tenant_slug=token.tenant.slug,
        tenant_name=token.tenant.name,
        role=role,
        scopes=scopes,
        client_id=application.client_id if application else "",
        client_name=(application.name or application.client_id) if application else "",
        token_id=token.pk,
    )

"""Access tokens an operator issues on the server (``manage.py mcp_token``), for a person to try
the MCP endpoint with curl or the Inspector without a browser flow.

They belong to one first-party client, "Gatehouse CLI", made on first use. It is confidential with
a secret nobody is ever shown, and it registers no redirect URI: so no browser can be sent through
the authorization endpoint for it, and no one can present it at the token endpoint. The only way
its tokens come to exist is this service.

A token issued here is an ordinary access token in every other respect: bound to one tenant and to
the MCP resource, stored as its checksum only (``oauth.token_storage``), audited as
``token.issued``, checked by the MCP endpoint like any other, revocable by ``revoke_tokens``, the
connected-applications page and the admin. It has no refresh token and a short life by default,
so a forgotten one stops working on its own.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import Application, set_token_value
from oauthlib.common import generate_token

from accounts.models import Tenant, User
from accounts.scopes import scope_definitions, scopes_for_role
from accounts.selectors import membership_get, tenant_get, user_get
from core.audit.trail import audit_record
from core.errors import InvalidInput, PermissionDenied
from core.models import AuditAction
from core.text_safety import text_unstorable_reason
from oauth.models import AccessToken
from oauth.services import BY_OPERATOR_COMMAND

CLI_CLIENT_ID = "gatehouse-cli"
CLI_CLIENT_NAME = "Gatehouse CLI"
# What the audit row says the token came from, where the token endpoint writes the OAuth grant type.
CLI_GRANT = "operator-command"

CLI_TOKEN_DEFAULT_MINUTES = 60
CLI_TOKEN_MAX_MINUTES = 24 * 60

USER_INACTIVE = "User {username!r} is deactivated."
NOT_A_MEMBER = "User {username!r} is not a member of tenant {slug!r}."
TENANT_INACTIVE = "Tenant {slug!r} is deactivated."
UNKNOWN_SCOPES = "Unknown scope(s): {scopes}. Known scopes: {known}."
SCOPES_BEYOND_ROLE = "The role {role!r} does not allow {scopes}; it allows {allowed}."
NO_SCOPES = "No scopes to grant: give at least one with --scopes, or leave it out for the role's own."
MINUTES_OUT_OF_RANGE = "The token's life must be between 1 and {maximum} minutes, not {minutes}."
UNSTORABLE = "The {field} {reason}."


@dataclass(frozen=True, slots=True)
class IssuedCliToken:
    """The token's value, to be shown once and never kept, and what it allows."""

    token: str
    access_token: AccessToken
    username: str
    tenant_slug: str
    scopes: list[str]
    expires: datetime
    resource: str


def cli_application_get_or_create() -> Application:
    """The "Gatehouse CLI" client, made the first time a token is issued for it."""
    application, created = Application.objects.get_or_create(
        client_id=CLI_CLIENT_ID,
        defaults={
            "name": CLI_CLIENT_NAME,
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            # No redirect URI: the authorization endpoint refuses every request for it.
            "redirect_uris": "",
            # Stored hashed and never shown: no one can authenticate as this client.
            "client_secret": secrets.token_urlsafe(48),
            "registration_source": Application.RegistrationSource.MANUAL,
        },
    )
    if created:
        audit_record(
            action=AuditAction.CLIENT_REGISTERED,
            application=application,
            target=application.name,
            detail={"redirect_uris": [], "registration_source": "manage.py mcp_token"},
        )
    return application


def _refuse_unstorable(*, field: str, value: object) -> None:
    # PostgreSQL refuses a NUL in a query parameter with an exception, not an empty result.
    reason = text_unstorable_reason(value)
    if reason is not None:
        raise InvalidInput(UNSTORABLE.format(field=field, reason=reason))


def _scopes_choose(*, requested: Iterable[str] | None, role: str) -> list[str]:
    """The role's scopes, or the requested ones if the role allows every one of them."""
    allowed = scopes_for_role(role=role)
    if requested is None:
        chosen = set(allowed)
    else:
        chosen = set(requested)
        unknown = sorted(chosen - set(scope_definitions()))
        if unknown:
            raise InvalidInput(
                UNKNOWN_SCOPES.format(scopes=" ".join(unknown), known=" ".join(sorted(scope_definitions())))
            )
        # Only narrowed, never widened: an operator cannot hand out what the person's role withholds.
        beyond = sorted(chosen - allowed)
        if beyond:
            message = SCOPES_BEYOND_ROLE.format(
                role=role, scopes=" ".join(beyond), allowed=" ".join(sorted(allowed))
            )
            raise PermissionDenied(message)
    if not chosen:
        raise InvalidInput(NO_SCOPES)
    return sorted(chosen)


@transaction.atomic
def access_token_issue_for_cli(
    *,
    username: str,
    tenant_slug: str,
    scopes: Iterable[str] | None = None,
    minutes: int = CLI_TOKEN_DEFAULT_MINUTES,
) -> IssuedCliToken:
    """Issue an access token for the person in the tenant, from the Gatehouse CLI client.

    ``scopes`` None means everything the person's role allows; otherwise it may only narrow that.
    Raises ``NotFound`` (no such user or tenant), ``PermissionDenied`` (not an active member of an
    active tenant, or a scope beyond the role) or ``InvalidInput`` (anything else refused).
    """
    _refuse_unstorable(field="username", value=username)
    _refuse_unstorable(field="tenant", value=tenant_slug)
    if not 1 <= minutes <= CLI_TOKEN_MAX_MINUTES:
        raise InvalidInput(MINUTES_OUT_OF_RANGE.format(maximum=CLI_TOKEN_MAX_MINUTES, minutes=minutes))
    requested = None if scopes is None else [str(scope) for scope in scopes]
    if requested is not None:
        _refuse_unstorable(field="scope", value=requested)
    user = user_get(username=username)
    tenant = tenant_get(slug=tenant_slug)
    role = _active_member_role(user=user, tenant=tenant)
    granted = _scopes_choose(requested=requested, role=role)

    raw_token = generate_token()
    expires = timezone.now() + timedelta(minutes=minutes)
    application = cli_application_get_or_create()
    access_token = AccessToken(
        user=user,
        tenant=tenant,
        application=application,
        scope=" ".join(granted),
        expires=expires,
        # The one resource a token from the token endpoint is bound to (oauth.authorize).
        resource=[settings.MCP_RESOURCE_URL],
    )
    # DOT's own path (its validator's too): the token column stays blank, only the checksum is written.
    set_token_value(access_token, raw_token)
    access_token.save()
    audit_record(
        action=AuditAction.TOKEN_ISSUED,
        user=user,
        tenant=tenant,
        application=application,
        target=str(access_token),
        detail={
            "grant_type": CLI_GRANT,
            "by": BY_OPERATOR_COMMAND,
            "scopes": granted,
            "minutes": minutes,
        },
    )
    return IssuedCliToken(
        token=raw_token,
        access_token=access_token,
        username=user.username,
        tenant_slug=tenant.slug,
        scopes=granted,
        expires=expires,
        resource=settings.MCP_RESOURCE_URL,
    )


def _active_member_role(*, user: User, tenant: Tenant) -> str:
    if not user.is_active:
        raise PermissionDenied(USER_INACTIVE.format(username=user.username))
    if not tenant.is_active:
        raise PermissionDenied(TENANT_INACTIVE.format(slug=tenant.slug))
    membership = membership_get(user=user, tenant=tenant)
    if membership is None:
        raise PermissionDenied(NOT_A_MEMBER.format(username=user.username, slug=tenant.slug))
    return str(membership.role)

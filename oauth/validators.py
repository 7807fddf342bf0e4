"""DOT's validator, taught that every grant and token belongs to one tenant, and that tokens are
kept hashed at rest with a refresh grace window DOT cannot offer with hashing (``token_storage``).

Authorization codes are kept hashed too, and remembered once used so that a replay revokes what
the first exchange issued (``oauth.code_replay``).

The client-credentials grant is for service clients only (``oauth.models.ServiceClient``): their
tokens are for the REST API, act as the client's own account in its one tenant, and carry no more
than the account's role allows.

The consent view passes the chosen tenant as the ``gatehouse_tenant_id`` credential; oauthlib
copies credentials onto its request object, and the three ``_create_*`` methods below store it.
They mirror DOT 3.4's own implementations field for field, adding only ``tenant``.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.models import Application, refresh_token_expire_timedelta, revoke_access_token
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from accounts.models import Membership
from accounts.scopes import scopes_granted
from core.audit.trail import audit_record
from core.models import AuditAction
from oauth.code_replay import (
    IssuedTokens,
    code_replay_revoke,
    code_replay_revoke_parallel,
    used_code_find,
    used_code_record,
)
from oauth.models import AccessToken, Grant, RefreshToken, ServiceClient
from oauth.resource import API_SCOPES, is_api_resource, served_resource
from oauth.selectors import access_token_find_for_client, refresh_token_find
from oauth.services import (
    BY_CLIENT,
    BY_REUSE_DETECTION,
    refresh_token_revoke,
    token_family_revoke,
    token_revoked_audit,
)
from oauth.token_storage import refresh_token_in_grace, token_checksum

TENANT_ATTRIBUTE = "gatehouse_tenant_id"
# What an exchange issued, for the used code to remember (``invalidate_authorization_code``).
TOKEN_FAMILY_ATTRIBUTE = "gatehouse_token_family"
ACCESS_CHECKSUM_ATTRIBUTE = "gatehouse_access_checksum"
# The grant as validate_code found it, for the checks of the same exchange (``_grant_seen``).
GRANT_SEEN_ATTRIBUTE = "gatehouse_grant_seen"
PKCE_S256_REQUIRED = 'PKCE with code_challenge_method "S256" is required.'
ACCOUNT_INACTIVE = "The account this grant belongs to is deactivated."
NOT_A_MEMBER = "The person this grant belongs to is no longer a member of its tenant."
TENANT_INACTIVE = "The tenant this grant belongs to is deactivated."
NOT_A_SERVICE_CLIENT = "The client credentials grant is only for a tenant's service clients."
ROLE_GRANTS_NO_SCOPE = "The service client's role grants none of the requested scopes the API takes."
API_RESOURCE_ONLY = "Service client tokens are for the API only"
ONE_RESOURCE = "A token is for exactly one resource: the MCP endpoint or the API."
# The service client's account, which its client-credentials tokens act as.
SERVICE_ACCOUNT_ATTRIBUTE = "gatehouse_service_account"
CLIENT_CREDENTIALS = "client_credentials"


def membership_refusal(*, user: Any, tenant_id: int) -> str | None:
    """Why the person can no longer use a grant in this tenant, or None if they still can."""
    if user is None or not user.is_active:
        return ACCOUNT_INACTIVE
    membership = Membership.objects.filter(user=user, tenant_id=tenant_id).select_related("tenant").first()
    if membership is None:
        return NOT_A_MEMBER
    if not membership.tenant.is_active:
        return TENANT_INACTIVE
    return None


def _tenant_id(request: Any) -> int:
    tenant_id = getattr(request, TENANT_ATTRIBUTE, None)
    if tenant_id is None:
        # Every issuing path sets it; reaching here means a grant type we do not offer.
        raise errors.InvalidGrantError(description="This grant is not bound to a tenant.", request=request)
    return int(tenant_id)


class TenantOAuth2Validator(OAuth2Validator):
    # Codes are stored as their checksum (oauth.token_storage); every lookup DOT makes by code
    # goes through one of these, each handing DOT the checksum in place of the code.

    def validate_code(
        self, client_id: str, code: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        checksum = token_checksum(code)
        if not super().validate_code(client_id, checksum, client, request, *args, **kwargs):
            used = used_code_find(code_checksum=checksum, application=client)
            if used is not None:
                # RFC 6749 4.1.2: a code presented twice ends what its first exchange issued.
                code_replay_revoke(used=used)
            return False
        grant = Grant.objects.filter(code=checksum, application=client).first()
        if grant is None:
            return False
        self._require_member(user=request.user, tenant_id=grant.tenant_id, request=request)
        setattr(request, TENANT_ATTRIBUTE, grant.tenant_id)
        # A parallel exchange of the same code may delete the grant from here on; the checks
        # that follow answer from this copy, so the loser reaches the replay path (a 400 from
        # invalidate_authorization_code) instead of a missing row.
        setattr(request, GRANT_SEEN_ATTRIBUTE, grant)
        return True

    @staticmethod
    def _grant_seen(*, code: str, client: Any, request: Any) -> Grant:
        """The grant ``validate_code`` accepted for this code. Without one the exchange is
        refused (never answered as "no PKCE challenge")."""
        grant = getattr(request, GRANT_SEEN_ATTRIBUTE, None)
        if grant is None or grant.code != token_checksum(code) or grant.application_id != client.pk:
            raise errors.InvalidGrantError(request=request)
        return grant

    def confirm_redirect_uri(
        self,
        client_id: str,
        code: str,
        redirect_uri: str,
        client: Any,
        request: Any,
        *args: Any,
        **kwargs: Any,
    ) -> bool:
        grant = self._grant_seen(code=code, client=client, request=request)
        return bool(grant.redirect_uri_allowed(redirect_uri))

    def get_code_challenge(self, code: str, request: Any) -> str | None:
        return self._grant_seen(code=code, client=request.client, request=request).code_challenge or None

    def get_code_challenge_method(self, code: str, request: Any) -> str | None:
        grant = self._grant_seen(code=code, client=request.client, request=request)
        return grant.code_challenge_method or None

    def get_authorization_code_scopes(
        self, client_id: str, code: str, redirect_uri: str, request: Any
    ) -> list[str]:
        return list(
            super().get_authorization_code_scopes(client_id, token_checksum(code), redirect_uri, request)
        )

    def get_authorization_code_nonce(
        self, client_id: str, code: str, redirect_uri: str, request: Any
    ) -> str | None:
        return super().get_authorization_code_nonce(client_id, token_checksum(code), redirect_uri, request)

    def _check_and_set_request_resource(self, request: Any) -> None:
        if request.grant_type == "authorization_code":
            # DOT reads the grant by ``request.code`` here: let it read by the checksum, only here.
            code = request.code
            request.code = token_checksum(code)
            try:
                super()._check_and_set_request_resource(request)
            finally:
                request.code = code
        else:
            super()._check_and_set_request_resource(request)
        # DOT lets a token request narrow what the grant holds, never widen it; whatever it settled
        # on must still be one resource we serve, so a token opens the MCP endpoint or the API.
        if request.grant_type == CLIENT_CREDENTIALS:
            request.resource = request.resource or [settings.API_RESOURCE_URL]
            if not all(is_api_resource(r) for r in request.resource):
                raise errors.CustomOAuth2Error(
                    error="invalid_target",
                    description=f"{API_RESOURCE_ONLY}, {settings.API_RESOURCE_URL}.",
                    request=request,
                )
            return
        # A grant from before resources were recorded was for the one resource there was.
        request.resource = request.resource or [settings.MCP_RESOURCE_URL]
        served = {served_resource(r) for r in request.resource}
        if None in served or len(served) != 1:
            raise errors.CustomOAuth2Error(error="invalid_target", description=ONE_RESOURCE, request=request)

    def validate_grant_type(
        self, client_id: str, grant_type: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs):
            return False
        if grant_type == CLIENT_CREDENTIALS:
            self._service_client_bind(client=client, request=request)
        return True

    def _service_client_bind(self, *, client: Any, request: Any) -> None:
        """Make a client-credentials request act as its service client's account, in its tenant, for the
        API; or refuse it, saying why. Checked before any token exists (oauthlib answers these errors
        itself), and again by every request the token makes (``oauth.bearer``)."""
        service_client = (
            ServiceClient.objects.filter(application=client).select_related("account", "tenant").first()
        )
        if service_client is None:
            raise errors.UnauthorizedClientError(description=NOT_A_SERVICE_CLIENT, request=request)
        self._require_member(user=service_client.account, tenant_id=service_client.tenant_id, request=request)
        self._check_and_set_request_resource(request)
        request.user = service_client.account
        setattr(request, SERVICE_ACCOUNT_ATTRIBUTE, service_client.account)
        setattr(request, TENANT_ATTRIBUTE, service_client.tenant_id)

    def validate_scopes(
        self, client_id: str, scopes: list[str], client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_scopes(client_id, scopes, client, request, *args, **kwargs):
            return False
        account = getattr(request, SERVICE_ACCOUNT_ATTRIBUTE, None)
        if request.grant_type != CLIENT_CREDENTIALS or account is None:
            return True
        # No consent page filters a service client's scopes, so its role does it here: what was
        # asked (by default, everything) and the role allows, of the scopes the API reads (its
        # tokens open nothing else). oauthlib writes these into the token.
        membership = Membership.objects.filter(user=account, tenant_id=_tenant_id(request)).first()
        allowed = scopes_granted(requested=scopes, role=membership.role) if membership else []
        granted = [scope for scope in allowed if scope in API_SCOPES]
        if not granted:
            raise errors.InvalidScopeError(description=ROLE_GRANTS_NO_SCOPE, request=request)
        request.scopes = granted
        return True

    def invalidate_authorization_code(
        self, client_id: str, code: str, request: Any, *args: Any, **kwargs: Any
    ) -> None:
        """DOT deletes the grant once exchanged; the code is remembered as used, with the tokens
        just issued, in the same transaction. A parallel exchange of the same code waits on the
        delete, finds nothing to delete, and is a replay: both exchanges' tokens are revoked."""
        checksum = token_checksum(code)
        issued = IssuedTokens(
            family=getattr(request, TOKEN_FAMILY_ATTRIBUTE, None),
            access_checksum=getattr(request, ACCESS_CHECKSUM_ATTRIBUTE, ""),
        )
        with transaction.atomic():
            grant = (
                Grant.objects.select_for_update().filter(code=checksum, application=request.client).first()
            )
            if grant is not None:
                used_code_record(code_checksum=checksum, grant=grant, issued=issued)
                grant.delete()
                return
        code_replay_revoke_parallel(
            code_checksum=checksum, application=request.client, user=request.user, issued=issued
        )
        raise errors.InvalidGrantError(request=request)

    def validate_refresh_token(
        self, refresh_token: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        # DOT's version, with our grace window in place of its (which needs plaintext storage).
        instance = refresh_token_find(token=refresh_token)
        if instance is None:
            return False
        if instance.revoked is not None and not refresh_token_in_grace(token=instance):
            # A rotated or revoked token presented again: whoever holds a copy loses the grant.
            if instance.token_family is not None:
                token_family_revoke(family=instance.token_family, by=BY_REUSE_DETECTION)
            return False
        if instance.revoked is None and not self._refresh_token_current(instance):
            return False
        # A person removed from the tenant, deactivated, or whose tenant was deactivated, loses
        # the ability to refresh at once; the refusal says which (and the token view audits it).
        self._require_member(user=instance.user, tenant_id=instance.tenant_id, request=request)
        request.user = instance.user
        # The presented value, never the row's: the token column is blank (hashed at rest).
        request.refresh_token = refresh_token
        request.refresh_token_instance = instance
        setattr(request, TENANT_ATTRIBUTE, instance.tenant_id)
        return bool(instance.application_id == client.pk)

    @staticmethod
    def _refresh_token_current(instance: RefreshToken) -> bool:
        """DOT's expiry: a live refresh token dies REFRESH_TOKEN_EXPIRE_SECONDS after its access
        token expires, and one whose access token is gone has nothing left to refresh."""
        if instance.access_token is None:
            return False
        lifetime = refresh_token_expire_timedelta()
        return not lifetime or instance.access_token.expires + lifetime > timezone.now()

    def _save_bearer_token(self, token: dict[str, Any], request: Any, *args: Any, **kwargs: Any) -> None:
        previous = getattr(request, "refresh_token_instance", None)
        if not (isinstance(previous, RefreshToken) and token.get("refresh_token")):
            return super()._save_bearer_token(token, request, *args, **kwargs)
        # The lock DOT's rotation takes too: parallel refreshes with one token pass here one by one.
        locked = RefreshToken.objects.select_for_update().filter(pk=previous.pk).first()
        if locked is not None and locked.revoked is None:
            return super()._save_bearer_token(token, request, *args, **kwargs)
        # Another refresh rotated it first. DOT would hand back that refresh's pair, which it can
        # no longer read; inside the window this one gets a pair of its own in the same family.
        if locked is None or not refresh_token_in_grace(token=locked):
            raise errors.InvalidGrantError(request=request)
        self._check_and_set_request_resource(request)
        expires = timezone.now() + timedelta(
            seconds=token.get("expires_in", oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS)
        )
        # No source_refresh_token: the first refresh holds that one-to-one link; the family is
        # what ties this pair to the grant, for reuse detection and revocation alike.
        access_token = self._create_access_token(expires, request, token)
        self._create_refresh_token(request, token["refresh_token"], access_token, locked)
        return None

    def revoke_token(
        self, token: str, token_type_hint: str | None, request: Any, *args: Any, **kwargs: Any
    ) -> None:
        # RFC 7009: only the calling client's own tokens; anything else is answered 200 unchanged.
        application_id = getattr(request.client, "pk", None)
        if application_id is None:
            return
        revokers = [self._revoke_refresh_token, self._revoke_access_token]
        if token_type_hint == "access_token":
            revokers.reverse()
        for revoke in revokers:
            if revoke(token=token, application_id=application_id):
                return

    @staticmethod
    def _revoke_refresh_token(*, token: str, application_id: int) -> bool:
        instance = refresh_token_find(token=token, application_id=application_id)
        if instance is None:
            return False
        # The whole grant ends: every access token issued with or from the family's tokens.
        refresh_token_revoke(token=instance, by=BY_CLIENT)
        return True

    @staticmethod
    def _revoke_access_token(*, token: str, application_id: int) -> bool:
        instance = access_token_find_for_client(token=token, application_id=application_id)
        if instance is None:
            return False
        token_revoked_audit(token=instance, kind="access", by=BY_CLIENT)
        # DOT's path: its refresh token goes too, else the client would simply refresh.
        revoke_access_token(instance)
        return True

    def _load_application(self, client_id: str, request: Any) -> Any:
        # DOT creates the Application of a client ID metadata document the first time it sees the
        # URL; that first sight is the client's registration, and is audited like a DCR one.
        unseen = is_cimd_client_id(client_id) and not Application.objects.filter(client_id=client_id).exists()
        client = super()._load_application(client_id, request)
        if unseen and client is not None:
            audit_record(
                action=AuditAction.CLIENT_REGISTERED,
                application=client,
                target=client.name,
                detail={
                    "redirect_uris": client.redirect_uris.split(),
                    "registration_source": client.registration_source,
                },
            )
        return client

    def validate_redirect_uri(
        self, client_id: str, redirect_uri: str, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        # Exact match, RFC 8252 loopback ports and the operators' patterns (oauth.redirects).
        from oauth.redirects import redirect_uri_permitted

        return redirect_uri_permitted(application=request.client, redirect_uri=redirect_uri)

    @staticmethod
    def _require_member(*, user: Any, tenant_id: int, request: Any) -> None:
        """Refuse (invalid_grant, saying why) a grant whose person or tenant can no longer use it."""
        reason = membership_refusal(user=user, tenant_id=tenant_id)
        if reason is not None:
            raise errors.InvalidGrantError(description=reason, request=request)

    def _create_authorization_code(self, request: Any, code: dict[str, str], expires: Any = None) -> Grant:
        if not expires:
            expires = timezone.now() + timedelta(seconds=oauth2_settings.AUTHORIZATION_CODE_EXPIRE_SECONDS)
        if request.code_challenge_method != "S256":
            raise errors.InvalidRequestError(description=PKCE_S256_REQUIRED, request=request)
        return Grant.objects.create(
            application=request.client,
            user=request.user,
            tenant_id=_tenant_id(request),
            code=token_checksum(code["code"]),
            expires=expires,
            redirect_uri=request.redirect_uri,
            scope=" ".join(request.scopes),
            code_challenge=request.code_challenge or "",
            code_challenge_method=request.code_challenge_method or "",
            nonce=request.nonce or "",
            claims=json.dumps(request.claims or {}),
            resource=getattr(request, "resource", []),
        )

    def _create_access_token(
        self, expires: Any, request: Any, token: dict[str, Any], source_refresh_token: Any = None
    ) -> AccessToken:
        # DOT empties ``request.user`` for the client-credentials grant; a service client's token
        # acts as its account, so the token resolves like a person's (``oauth.service_clients``).
        user = request.user
        if request.grant_type == CLIENT_CREDENTIALS:
            user = getattr(request, SERVICE_ACCOUNT_ATTRIBUTE, None)
            if user is None:
                raise errors.UnauthorizedClientError(description=NOT_A_SERVICE_CLIENT, request=request)
        access_token = AccessToken(
            user=user,
            tenant_id=_tenant_id(request),
            scope=token["scope"],
            expires=expires,
            application=request.client,
            source_refresh_token=source_refresh_token,
            resource=getattr(request, "resource", []),
        )
        self._set_token_value(access_token, token["access_token"])
        access_token.save()
        setattr(request, ACCESS_CHECKSUM_ATTRIBUTE, access_token.token_checksum)
        return access_token

    def _create_refresh_token(
        self, request: Any, refresh_token_code: str, access_token: AccessToken, previous_refresh_token: Any
    ) -> RefreshToken:
        token_family = previous_refresh_token.token_family if previous_refresh_token else uuid.uuid4()
        refresh_token = RefreshToken(
            user=request.user,
            tenant_id=access_token.tenant_id,
            application=request.client,
            access_token=access_token,
            token_family=token_family,
            resource=getattr(request, "resource", []),
        )
        self._set_token_value(refresh_token, refresh_token_code)
        refresh_token.save()
        setattr(request, TOKEN_FAMILY_ATTRIBUTE, token_family)
        return refresh_token

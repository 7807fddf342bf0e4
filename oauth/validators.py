"""DOT's validator, taught that every grant and token belongs to one tenant.

The consent view passes the chosen tenant as the ``gatehouse_tenant_id`` credential; oauthlib
copies credentials onto its request object, and the three ``_create_*`` methods below store it.
They mirror DOT 3.4's own implementations field for field, adding only ``tenant``.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.models import Application
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from accounts.models import Membership
from mcp_gateway.audit import audit_record
from mcp_gateway.models import AuditAction
from oauth.models import AccessToken, Grant, RefreshToken

TENANT_ATTRIBUTE = "gatehouse_tenant_id"
PKCE_S256_REQUIRED = 'PKCE with code_challenge_method "S256" is required.'


def _tenant_id(request: Any) -> int:
    tenant_id = getattr(request, TENANT_ATTRIBUTE, None)
    if tenant_id is None:
        # Every issuing path sets it; reaching here means a grant type we do not offer.
        raise errors.InvalidGrantError(description="This grant is not bound to a tenant.", request=request)
    return int(tenant_id)


class TenantOAuth2Validator(OAuth2Validator):
    def validate_code(
        self, client_id: str, code: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            return False
        tenant_id = (
            Grant.objects.filter(code=code, application=client).values_list("tenant_id", flat=True).first()
        )
        if tenant_id is None or not self._still_member(user=request.user, tenant_id=tenant_id):
            return False
        setattr(request, TENANT_ATTRIBUTE, tenant_id)
        return True

    def validate_refresh_token(
        self, refresh_token: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        instance = request.refresh_token_instance
        # A person removed from the tenant (or deactivated) loses the ability to refresh at once.
        if not self._still_member(user=instance.user, tenant_id=instance.tenant_id):
            return False
        setattr(request, TENANT_ATTRIBUTE, instance.tenant_id)
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

    @staticmethod
    def _still_member(*, user: Any, tenant_id: int) -> bool:
        if user is None or not user.is_active:
            return False
        return Membership.objects.filter(user=user, tenant_id=tenant_id, tenant__is_active=True).exists()

    def _create_authorization_code(self, request: Any, code: dict[str, str], expires: Any = None) -> Grant:
        if not expires:
            expires = timezone.now() + timedelta(seconds=oauth2_settings.AUTHORIZATION_CODE_EXPIRE_SECONDS)
        if request.code_challenge_method != "S256":
            raise errors.InvalidRequestError(description=PKCE_S256_REQUIRED, request=request)
        return Grant.objects.create(
            application=request.client,
            user=request.user,
            tenant_id=_tenant_id(request),
            code=code["code"],
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
        access_token = AccessToken(
            user=request.user,
            tenant_id=_tenant_id(request),
            scope=token["scope"],
            expires=expires,
            application=request.client,
            source_refresh_token=source_refresh_token,
            resource=getattr(request, "resource", []),
        )
        self._set_token_value(access_token, token["access_token"])
        access_token.save()
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
        return refresh_token

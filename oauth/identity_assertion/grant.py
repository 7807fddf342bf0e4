"""The JWT bearer grant (RFC 7523) for identity assertions, as an oauthlib grant type beside DOT's
own, so that the token endpoint's client authentication, token generation, hashed storage
(``oauth.validators``), error answers and audit row (``oauth.views.TokenView``) are the ones every
other grant gets.

Only a confidential client that authenticated may present an assertion, and only one issued for
it. The person is who the provider's subject is in Gatehouse (``accounts.sign_in``): an assertion
that carries the provider's role claim signs them in as a browser sign-in would (their role mapped
anew); one without it needs a person who already belongs to the tenant. The token is for the MCP
endpoint, with the scopes the person's role allows of those asked for, and has no refresh token:
the provider decides how long access lasts by issuing new assertions. Each assertion is exchanged
once (its ``jti`` is kept until it expires).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.grant_types.base import GrantTypeBase

from accounts.models import ExternalIdentity, Membership
from accounts.scopes import scopes_for_role, scopes_granted
from accounts.sign_in.people import person_sign_in
from accounts.sign_in.roles import claim_values
from core.errors import PermissionDenied
from oauth.identity_assertion.verify import (
    LEEWAY_SECONDS,
    AssertionRefused,
    VerifiedAssertion,
    identity_assertion_verify,
)
from oauth.models import IdentityAssertionUse
from oauth.resource import API_SCOPES
from oauth.validators import TENANT_ATTRIBUTE

logger = logging.getLogger(__name__)

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_JAG_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"
CONFIDENTIAL_ONLY = "Only a confidential client that authenticates may present an identity assertion."
NO_ASSERTION = "The assertion parameter is missing."
REPLAYED = "This assertion was already exchanged."
UNKNOWN_PERSON = (
    "The person this assertion names has not signed in to this tenant: sign in through the "
    "organisation's identity provider once, or have the provider include the role claim."
)
NO_SCOPE = "The person's role allows none of the scopes asked for."


class JwtBearerGrant(GrantTypeBase):
    refresh_token = False

    def create_token_response(self, request: Any, token_handler: Any) -> tuple[dict[str, str], str, int]:
        headers = self._get_default_headers()
        try:
            self.validate_token_request(request)
        except errors.OAuth2Error as error:
            headers.update(error.headers)
            return headers, error.json, error.status_code
        token = token_handler.create_token(request, refresh_token=False)
        self.request_validator.save_token(token, request)
        return headers, json.dumps(token), 200

    def validate_token_request(self, request: Any) -> None:
        if request.grant_type != JWT_BEARER:
            raise errors.UnsupportedGrantTypeError(request=request)
        for param in ("grant_type", "assertion", "scope"):
            if param in request.duplicate_params:
                raise errors.InvalidRequestError(description=f"Duplicate {param} parameter.", request=request)
        self.validate_client_confidential(request)
        client = request.client
        if getattr(client, "client_type", "") != "confidential" or not getattr(client, "client_secret", ""):
            raise errors.UnauthorizedClientError(description=CONFIDENTIAL_ONLY, request=request)
        assertion = getattr(request, "assertion", None)
        if not isinstance(assertion, str) or not assertion:
            raise errors.InvalidRequestError(description=NO_ASSERTION, request=request)
        try:
            verified = identity_assertion_verify(assertion=assertion, client_id=client.client_id)
        except AssertionRefused as refusal:
            raise errors.InvalidGrantError(description=refusal.message, request=request) from None
        # Used up first: a refused person does not make the assertion usable again.
        _used_once(verified, request=request)
        user, role, tenant_id = _person(verified, request=request)
        asked = str(request.scope or verified.claims.get("scope") or "").split()
        allowed = scopes_granted(requested=asked or scopes_for_role(role=role), role=role)
        granted = [scope for scope in allowed if scope not in API_SCOPES]
        if not granted:
            raise errors.InvalidScopeError(description=NO_SCOPE, request=request)
        request.user = user
        request.scopes = granted
        # The token's audience is what the assertion names, never what the request says.
        request.resource = [verified.resource]
        setattr(request, TENANT_ATTRIBUTE, tenant_id)


def _person(verified: VerifiedAssertion, *, request: Any) -> tuple[Any, str, int]:
    provider = verified.provider
    if claim_values(claims=verified.claims, claim=provider.role_claim) or provider.default_role:
        try:
            signed_in = person_sign_in(provider_id=provider.pk, claims=verified.claims)
        except PermissionDenied as refusal:
            raise errors.InvalidGrantError(description=refusal.message, request=request) from None
        return signed_in.user, signed_in.role, provider.tenant_id
    identity = (
        ExternalIdentity.objects.select_related("user")
        .filter(provider=provider, subject=verified.claims["sub"])
        .first()
    )
    membership = (
        Membership.objects.filter(user=identity.user, tenant_id=provider.tenant_id).first()
        if identity
        else None
    )
    if identity is None or membership is None or not identity.user.is_active:
        raise errors.InvalidGrantError(description=UNKNOWN_PERSON, request=request)
    return identity.user, membership.role, provider.tenant_id


def identity_assertion_use_purge(*, now: datetime) -> int:
    """Forget the ``jti`` of assertions no longer accepted anyway (expired past the leeway); returns
    how many. Each exchange runs it before recording its own, so the table holds at most the
    assertions exchanged within one assertion lifetime, with no scheduled job to forget."""
    deleted, _ = IdentityAssertionUse.objects.filter(expires__lt=now).delete()
    return deleted


def _used_once(verified: VerifiedAssertion, *, request: Any) -> None:
    # Kept until verify_assertion would refuse the assertion as expired, leeway included.
    expires = datetime.fromtimestamp(verified.expires + LEEWAY_SECONDS, tz=UTC)
    identity_assertion_use_purge(now=datetime.now(tz=UTC))
    try:
        with transaction.atomic():
            IdentityAssertionUse.objects.create(
                provider=verified.provider, jti=verified.claims["jti"], expires=expires
            )
    except IntegrityError:
        raise errors.InvalidGrantError(description=REPLAYED, request=request) from None

"""The authorization code flow with a tenant's OpenID Connect provider, through Authlib.

Authlib does the protocol: the provider's discovery document, PKCE (S256), ``state`` and ``nonce``
kept in the person's session, the code exchanged with the client secret, and the ID token checked
(signature against the provider's JWKS, fetched again when a key is unknown; issuer, audience,
expiry, nonce). Here: one client per provider's configuration, the issuer the discovery document
names held to the configured one (a provider cannot speak for another), the role claim's scope
asked for when the provider offers one of that name, and the claims the role map reads taken from
the UserInfo endpoint when the ID token leaves them out.

What the flow must remember across the redirect (which provider, where to go next) is kept in the
session under the flow's ``state``, beside Authlib's own data; both are used once.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from authlib.integrations.base_client import OAuthError
from authlib.integrations.django_client import DjangoIntegration, DjangoOAuth2App
from django.http import HttpRequest, HttpResponseRedirect
from joserfc.errors import JoseError
from requests import RequestException

from accounts.models import IdentityProvider
from accounts.sign_in.roles import claim_values
from core.crypto import secret_decrypt
from core.errors import PermissionDenied, Unavailable

SCOPES = "openid email profile"
PENDING_KEY = "gatehouse_sign_in"
PENDING_MAX = 5
HTTP_TIMEOUT_SECONDS = 10
UNREACHABLE = "{provider} could not be reached ({why}). Try again in a moment."
ISSUER_MISMATCH = "{provider}'s discovery document names another issuer; an operator must check it."
FLOW_UNKNOWN = "This sign-in was not started here, or was already used. Start again from the sign-in page."
PROVIDER_REFUSED = "{provider} did not sign you in: {why}"
TOKEN_INVALID = "{provider}'s answer could not be trusted ({why}). Start again from the sign-in page."
SECRET_UNREADABLE = "The client secret stored for {provider} cannot be read; an operator must enter it again."


@dataclass(frozen=True)
class Finished:
    provider_id: int
    claims: dict[str, Any]
    next_url: str


def _client(provider: IdentityProvider) -> DjangoOAuth2App:
    try:
        secret = (
            secret_decrypt(token=provider.client_secret_encrypted) if provider.client_secret_encrypted else ""
        )
    except ValueError:
        raise Unavailable(
            SECRET_UNREADABLE.format(provider=provider.name), data={"reason": "secret"}
        ) from None
    name = f"idp-{provider.pk}"
    return DjangoOAuth2App(
        DjangoIntegration(name),
        name=name,
        client_id=provider.client_id,
        client_secret=secret or None,
        server_metadata_url=f"{provider.issuer.rstrip('/')}/.well-known/openid-configuration",
        client_kwargs={
            "scope": SCOPES,
            "code_challenge_method": "S256",
            "default_timeout": HTTP_TIMEOUT_SECONDS,
        },
    )


def _metadata(client: DjangoOAuth2App, provider: IdentityProvider) -> dict[str, Any]:
    try:
        metadata = client.load_server_metadata()
    except (RequestException, ValueError) as error:
        raise Unavailable(
            UNREACHABLE.format(provider=provider.name, why=type(error).__name__),
            data={"reason": "unreachable"},
        ) from None
    if str(metadata.get("issuer", "")).rstrip("/") != provider.issuer.rstrip("/"):
        raise Unavailable(ISSUER_MISMATCH.format(provider=provider.name), data={"reason": "issuer"})
    return dict(metadata)


def sign_in_start(
    *, request: HttpRequest, provider: IdentityProvider, redirect_uri: str, next_url: str
) -> HttpResponseRedirect:
    """The redirect to the provider's authorization endpoint, the flow remembered in the session."""
    client = _client(provider)
    metadata = _metadata(client, provider)
    # Some providers send groups only when asked for by a scope of that name (Okta's "groups").
    claim_scope = provider.role_claim.split(".", 1)[0]
    if claim_scope in (metadata.get("scopes_supported") or []):
        client.client_kwargs["scope"] = f"{SCOPES} {claim_scope}"
    try:
        response = client.authorize_redirect(request, redirect_uri, nonce=secrets.token_urlsafe(24))
    except RequestException as error:
        raise Unavailable(
            UNREACHABLE.format(provider=provider.name, why=type(error).__name__),
            data={"reason": "unreachable"},
        ) from None
    state = _state_of(response["Location"])
    pending = dict(request.session.get(PENDING_KEY) or {})
    # A person who starts again and again keeps the last few flows, not all of them.
    for stale in list(pending)[: max(0, len(pending) - PENDING_MAX + 1)]:
        pending.pop(stale, None)
    pending[state] = {"provider": provider.pk, "next": next_url}
    request.session[PENDING_KEY] = pending
    return response


def _state_of(location: str) -> str:
    return parse_qs(urlsplit(location).query)["state"][0]


def sign_in_finish(*, request: HttpRequest) -> Finished:
    """The claims of the person the provider signed in, checked; the flow is used up either way."""
    state = str(request.GET.get("state", ""))
    pending = dict(request.session.get(PENDING_KEY) or {})
    flow = pending.pop(state, None) if state else None
    request.session[PENDING_KEY] = pending
    provider = (
        IdentityProvider.objects.select_related("tenant").filter(pk=flow["provider"]).first()
        if isinstance(flow, dict)
        else None
    )
    if provider is None or not isinstance(flow, dict):
        raise PermissionDenied(FLOW_UNKNOWN, data={"reason": "flow_unknown"})
    client = _client(provider)
    _metadata(client, provider)
    try:
        token = client.authorize_access_token(request)
    except OAuthError as error:
        why = (error.description or error.error or "refused")[:200]
        raise PermissionDenied(
            PROVIDER_REFUSED.format(provider=provider.name, why=why),
            data={"reason": "provider_refused", "provider": provider.pk, "error": str(error.error)[:100]},
        ) from None
    except (JoseError, ValueError, KeyError) as error:
        raise PermissionDenied(
            TOKEN_INVALID.format(provider=provider.name, why=type(error).__name__),
            data={"reason": "token_invalid", "provider": provider.pk},
        ) from None
    except RequestException as error:
        raise Unavailable(
            UNREACHABLE.format(provider=provider.name, why=type(error).__name__),
            data={"reason": "unreachable"},
        ) from None
    claims = token.get("userinfo")
    if not isinstance(claims, dict):
        # No ID token, or no nonce to check it against: nothing here can be trusted.
        raise PermissionDenied(
            TOKEN_INVALID.format(provider=provider.name, why="no ID token"),
            data={"reason": "token_invalid", "provider": provider.pk},
        )
    claims = dict(claims)
    if not claim_values(claims=claims, claim=provider.role_claim):
        claims.update(_userinfo_claims(client, token, subject=claims.get("sub"), claim=provider.role_claim))
    return Finished(provider_id=provider.pk, claims=claims, next_url=str(flow.get("next") or ""))


def _userinfo_claims(
    client: DjangoOAuth2App, token: dict[str, Any], *, subject: Any, claim: str
) -> dict[str, Any]:
    """The role claim from the UserInfo endpoint, if it answers for the same subject."""
    try:
        info = client.userinfo(token=token)
    except (RequestException, ValueError, OAuthError):
        return {}
    if not isinstance(info, dict) or info.get("sub") != subject:
        return {}
    top = claim.split(".", 1)[0]
    return {top: info[top]} if top in info else {}

"""An identity assertion (ID-JAG), checked as draft-ietf-oauth-identity-assertion-authz-grant and
the MCP enterprise-managed authorization extension require, before any token exists.

The JOSE work is joserfc's (Authlib's): the signature against the issuing provider's keys
(``keys``), with asymmetric algorithms only. Here: the header's ``typ`` (``oauth-id-jag+jwt``),
an issuer that is the identity provider of an active tenant that accepts assertions, ``aud`` this
authorization server, ``exp`` and ``iat`` (a short lifetime, a little clock skew), ``sub``, ``jti``,
the ``client_id`` the assertion was issued for equal to the client that authenticated, and a
``resource`` we serve. Every refusal is ``AssertionRefused`` with a reason for the audit trail and a
message for the client (``invalid_grant``); none says more than which check failed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jws import JWSRegistry

from accounts.models import IdentityProvider
from oauth.identity_assertion.keys import KeysUnavailable, provider_keys
from oauth.resource import served_resource

ID_JAG_TYPE = "oauth-id-jag+jwt"
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_SECONDS = 30
MAX_LIFETIME_SECONDS = 600
MAX_ASSERTION_CHARS = 16_384
MAX_CLAIM_CHARS = 255


class AssertionRefused(Exception):
    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


@dataclass(frozen=True)
class VerifiedAssertion:
    provider: IdentityProvider
    claims: dict[str, Any]
    resource: str
    expires: int


def identity_assertion_verify(
    *, assertion: str, client_id: str, now: float | None = None
) -> VerifiedAssertion:
    """The checked claims of ``assertion``, presented by the authenticated client ``client_id``."""
    if not assertion or len(assertion) > MAX_ASSERTION_CHARS or not assertion.isascii():
        raise AssertionRefused("The assertion is not a compact JWT.", reason="malformed")
    try:
        unverified = jws.extract_compact(assertion.encode())
        header = unverified.headers()
    except (JoseError, ValueError, TypeError) as error:
        raise AssertionRefused("The assertion is not a compact JWT.", reason="malformed") from error
    if header.get("typ") != ID_JAG_TYPE:
        raise AssertionRefused(f"The assertion's typ is not {ID_JAG_TYPE}.", reason="typ")
    if header.get("alg") not in ALGORITHMS:
        raise AssertionRefused("The assertion's algorithm is not accepted.", reason="alg")
    # Only to find whose keys to check the signature with: nothing else is read before it verifies.
    provider = _provider(_json_payload(unverified.payload).get("iss"))
    try:
        kid = header.get("kid")
        keys = provider_keys(provider=provider, kid=kid if isinstance(kid, str) else None)
    except KeysUnavailable as error:
        raise AssertionRefused(
            f"The issuer's signing keys could not be read ({error}).", reason="keys_unavailable"
        ) from None
    try:
        token = jwt.decode(assertion, keys, registry=JWSRegistry(algorithms=ALGORITHMS))
    except (JoseError, ValueError) as error:
        raise AssertionRefused("The assertion's signature does not verify.", reason="signature") from error
    claims = dict(token.claims)
    _times(claims, now=time.time() if now is None else now)
    for name in ("sub", "jti", "client_id"):
        value = claims.get(name)
        if not isinstance(value, str) or not value or len(value) > MAX_CLAIM_CHARS or "\x00" in value:
            raise AssertionRefused(f"The assertion has no usable {name}.", reason=name)
    if not _names_us(claims.get("aud")):
        raise AssertionRefused("The assertion is not for this authorization server (aud).", reason="aud")
    if claims["client_id"] != client_id:
        raise AssertionRefused("The assertion was issued for another client.", reason="client_id")
    resource = served_resource(claims.get("resource"))
    if resource is None or resource != settings.MCP_RESOURCE_URL:
        raise AssertionRefused("The assertion names no resource this server serves.", reason="resource")
    return VerifiedAssertion(provider=provider, claims=claims, resource=resource, expires=int(claims["exp"]))


def _json_payload(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise AssertionRefused("The assertion is not a compact JWT.", reason="malformed") from error
    if not isinstance(value, dict):
        raise AssertionRefused("The assertion is not a compact JWT.", reason="malformed")
    return value


def _provider(issuer: object) -> IdentityProvider:
    """The provider whose assertions Gatehouse takes, named by ``iss``; refused otherwise."""
    if not isinstance(issuer, str) or not issuer or len(issuer) > 500 or "\x00" in issuer:
        raise AssertionRefused("The assertion's issuer is not trusted.", reason="issuer")
    candidates = IdentityProvider.objects.select_related("tenant").filter(
        enabled=True, accepts_identity_assertions=True, tenant__is_active=True
    )
    provider = next((p for p in candidates if p.issuer.rstrip("/") == issuer.rstrip("/")), None)
    if provider is None:
        raise AssertionRefused("The assertion's issuer is not trusted.", reason="issuer")
    return provider


def _times(claims: dict[str, Any], *, now: float) -> None:
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int) or isinstance(exp, bool):
        raise AssertionRefused("The assertion has no usable exp.", reason="exp")
    if exp + LEEWAY_SECONDS < now:
        raise AssertionRefused("The assertion has expired.", reason="expired")
    if iat is not None and (not isinstance(iat, int) or iat - LEEWAY_SECONDS > now):
        raise AssertionRefused("The assertion was issued in the future (iat).", reason="iat")
    if exp - (iat if isinstance(iat, int) else now) > MAX_LIFETIME_SECONDS:
        raise AssertionRefused(
            f"The assertion lives longer than {MAX_LIFETIME_SECONDS} s.", reason="lifetime"
        )


def _names_us(audience: object) -> bool:
    issuer = str(settings.PUBLIC_URL).rstrip("/")
    values = audience if isinstance(audience, list) else [audience]
    return any(isinstance(v, str) and v.rstrip("/") == issuer for v in values)

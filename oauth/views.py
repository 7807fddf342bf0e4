"""DOT's token, revocation and registration endpoints, throttled where a stranger could flood them
and audited: one event per token issued, refreshed or revoked and per client registered
(revocations are audited where they happen, in ``oauth.services``).

DOT does the OAuth work; these subclasses look at what it answered. Nothing secret (a code, a
token, a verifier, a client secret) ever reaches the audit trail: tokens are looked up by checksum
and only their owner, tenant and client are recorded.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import unquote

from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider import views as oauth2_views

from core.audit import audit_record
from core.models import AuditAction, AuditOutcome, RateLimitScope
from core.throttles import client_address, throttle_check
from oauth.redirects import redirect_transport_is_safe
from oauth.selectors import access_token_find, application_find

REGISTRATION_SOURCE = "dcr"
UNSAFE_REDIRECT = "Redirect URIs must use https, or plain http to a loopback address only:"


def _unsafe_redirect_uris(request: HttpRequest) -> list[str]:
    try:
        metadata = json.loads(request.body or b"{}")
    except ValueError:
        return []  # DOT answers malformed bodies itself.
    uris = metadata.get("redirect_uris") if isinstance(metadata, dict) else None
    if not isinstance(uris, list):
        return []
    return [str(uri) for uri in uris if not redirect_transport_is_safe(str(uri))]


def _json_body(response: HttpResponse) -> dict[str, Any]:
    try:
        body = json.loads(response.content or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _client_id(request: HttpRequest) -> str:
    """The client a token-endpoint request names: HTTP Basic (confidential) or the form (public)."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return ""
        return unquote(decoded.partition(":")[0])
    return str(request.POST.get("client_id", ""))


class TokenView(oauth2_views.TokenView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        grant_type = str(request.POST.get("grant_type", ""))
        response = super().post(request, *args, **kwargs)
        action = AuditAction.TOKEN_REFRESHED if grant_type == "refresh_token" else AuditAction.TOKEN_ISSUED
        body = _json_body(response)
        issued = body.get("access_token") if response.status_code == 200 else None
        token = access_token_find(token=str(issued)) if issued else None
        if token is not None:
            audit_record(
                action=action,
                user=token.user,
                tenant=token.tenant,
                application=token.application,
                target=str(token),
                detail={"grant_type": grant_type, "scopes": token.scope.split()},
            )
        else:
            detail = {
                "grant_type": grant_type[:100],
                "error": str(body.get("error", "")) or f"http_{response.status_code}",
            }
            if body.get("error_description"):
                # Why, when the validator said: a deactivated tenant, a removed member.
                detail["error_description"] = str(body["error_description"])[:200]
            audit_record(
                action=action,
                outcome=AuditOutcome.ERROR,
                application=application_find(client_id=_client_id(request)),
                detail=detail,
            )
        return response


class RevokeTokenView(oauth2_views.RevokeTokenView):
    """RFC 7009 revocation. The validator (``TenantOAuth2Validator.revoke_token``) finds the token
    by checksum, revokes it through ``oauth.services`` and audits every token that stops working;
    unknown tokens are answered 200 as the RFC says, and leave no trace."""


class DynamicClientRegistrationView(oauth2_views.DynamicClientRegistrationView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle_check(request=request, scope=RateLimitScope.REGISTER, key=client_address())
        unsafe = _unsafe_redirect_uris(request)
        if unsafe:
            # Refused at registration, not only at authorization: the client learns at once, and
            # no application is stored that could never be used.
            return JsonResponse(
                {"error": "invalid_redirect_uri", "error_description": f"{UNSAFE_REDIRECT} {unsafe[0]}"},
                status=400,
            )
        response = super().post(request, *args, **kwargs)
        if response.status_code == 201:
            body = _json_body(response)
            application = application_find(client_id=str(body.get("client_id", "")))
            audit_record(
                action=AuditAction.CLIENT_REGISTERED,
                application=application,
                target=application.name if application else "",
                detail={
                    "redirect_uris": body.get("redirect_uris", []),
                    "registration_source": REGISTRATION_SOURCE,
                },
            )
        return response

"""DOT's token, revocation and registration endpoints, throttled where a stranger could flood them
and audited: one event per token issued, refreshed or revoked and per client registered, updated
or deleted (revocations are audited where they happen, in ``oauth.services``). Registrations and
their updates meet one policy first (``oauth.registration_policy``).

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

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from oauth2_provider import views as oauth2_views
from oauth2_provider.models import Application

from core.audit.trail import audit_record
from core.models import AuditAction, AuditOutcome, RateLimitScope
from core.text_safety import storable_text
from core.throttles import client_address, throttle_check
from oauth.registration_policy import ClientMetadataRefused, registration_request_check
from oauth.selectors import access_token_find, application_find

REGISTRATION_SOURCE = "dcr"


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
        if body and not response.get("Content-Type", "").startswith("application/json"):
            # oauthlib drops its JSON headers on an error raised after validation (a code that
            # lost the race for its grant): the body is still RFC 6749's JSON error, say so.
            response["Content-Type"] = "application/json"
            response["Cache-Control"] = "no-store"
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
        # Refused here, not only at authorization: the client learns at once, and no application
        # is stored that could never be used. DOT then parses the same, now bounded, body.
        registration_request_check(request)
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


# What an update may change, by its RFC 7591 name, and the Application field that holds it.
_CLIENT_FIELDS = {
    "client_name": "name",
    "redirect_uris": "redirect_uris",
    "grant_types": "authorization_grant_type",
    "token_endpoint_auth_method": "client_type",
}


def _client_fields(application: Application) -> dict[str, str]:
    return {field: str(getattr(application, attribute)) for field, attribute in _CLIENT_FIELDS.items()}


def _refusal_audit(*, action: AuditAction, client_id: str, application: Any, error: str, reason: str) -> None:
    target, _ = storable_text(client_id[:200])
    audit_record(
        action=action,
        outcome=AuditOutcome.DENIED,
        application=application,
        target=target,
        detail={"error": error[:100], "reason": reason[:300]},
    )


def _refused_response_audit(
    *, action: AuditAction, client_id: str, application: Any, response: HttpResponse
) -> None:
    body = _json_body(response)
    _refusal_audit(
        action=action,
        client_id=client_id,
        application=application,
        error=str(body.get("error", "")) or f"http_{response.status_code}",
        reason=str(body.get("error_description", "")),
    )


class DynamicClientRegistrationManagementView(oauth2_views.DynamicClientRegistrationManagementView):
    """RFC 7592: a client reads, replaces or deletes its own registration with its registration
    access token. A replacement meets the same policy as a registration (``oauth.registration_policy``),
    so the token cannot store what the registration endpoint refuses. Updates and deletes are
    audited, refused ones too, with the names of the fields that changed; never the token."""

    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        auth = self._authenticate_registration_request(request, client_id)
        if isinstance(auth, HttpResponse):
            _refused_response_audit(
                action=AuditAction.CLIENT_UPDATED, client_id=client_id, application=None, response=auth
            )
            return auth
        application = auth.application
        try:
            registration_request_check(request)
        except ClientMetadataRefused as refusal:
            _refusal_audit(
                action=AuditAction.CLIENT_UPDATED,
                client_id=client_id,
                application=application,
                error=refusal.oauth_error or "",
                reason=refusal.message,
            )
            raise
        before = _client_fields(application)
        # The update and its audit row commit together, or neither does.
        with transaction.atomic():
            response = super().put(request, client_id, *args, **kwargs)
            if response.status_code != 200:
                _refused_response_audit(
                    action=AuditAction.CLIENT_UPDATED,
                    client_id=client_id,
                    application=application,
                    response=response,
                )
                return response
            application.refresh_from_db()
            after = _client_fields(application)
            changed = sorted(field for field, value in after.items() if before[field] != value)
            detail: dict[str, Any] = {"changed": changed, "registration_source": REGISTRATION_SOURCE}
            if "redirect_uris" in changed:
                detail["redirect_uris"] = application.redirect_uris.split()
            audit_record(
                action=AuditAction.CLIENT_UPDATED,
                application=application,
                target=application.name,
                detail=detail,
            )
        return response

    def delete(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        auth = self._authenticate_registration_request(request, client_id)
        if isinstance(auth, HttpResponse):
            _refused_response_audit(
                action=AuditAction.CLIENT_DELETED, client_id=client_id, application=None, response=auth
            )
            return auth
        application = auth.application
        with transaction.atomic():
            # Written before the delete, which empties the row's link; the client id stays as text.
            audit_record(
                action=AuditAction.CLIENT_DELETED,
                application=application,
                target=application.name,
                detail={
                    "client_id": application.client_id,
                    "registration_source": REGISTRATION_SOURCE,
                    "reason": "deleted by the client (RFC 7592)",
                },
            )
            application.delete()
        return HttpResponse(status=204)

"""Login and consent. The consent view is DOT's AuthorizationView with the tenant choice added."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import Application
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import AuthorizationView
from oauthlib.oauth2.rfc6749.errors import (
    AccessDeniedError,
    ConsentRequired,
    CustomOAuth2Error,
    InvalidRequestError,
)

from accounts.models import Membership, User
from accounts.scopes import scope_definitions, scopes_for_role, scopes_granted
from accounts.selectors import membership_get, membership_list_for_user
from core.audit.trail import audit_record
from core.errors import RateLimited
from core.http_errors import ERROR_TEMPLATE
from core.loopback import is_loopback_host
from core.models import AuditAction, AuditOutcome
from core.uri_schemes import uri_scheme
from oauth.authorize_throttle import authorize_refusal_redirect, authorize_throttle
from oauth.consent import ConsentMemory, consent_decide, consent_list_for_client, consent_remember
from oauth.forms import ConsentForm, consent_form_altered
from oauth.redirects import is_private_use_redirect
from oauth.resource import is_api_resource, served_resource
from oauth.selectors import application_find
from oauth.validators import PKCE_S256_REQUIRED, TENANT_ATTRIBUTE

NO_TENANT_MESSAGE = "Your account is not a member of any tenant, so no application can be connected to it."
TENANT_NOT_AVAILABLE = "That tenant is not one of yours. Go back to the application and start again."
REQUEST_ALTERED = (
    "The authorization request was incomplete or altered. Go back to the application and start again."
)
ROLE_GRANTS_NOTHING = "Your role in this tenant grants none of the permissions the application asked for."
RESOURCE_NOT_SERVED = "This server issues tokens only for its MCP endpoint and its API"
ONE_RESOURCE_ONLY = (
    "A token is for one resource: ask for the MCP endpoint or the API, not both, in one request."
)
CONSENT_REQUIRED = "The person has not allowed this request yet; ask again without prompt=none."
LOOPBACK_WARNING = (
    "This application runs on your own computer: every address it can send you back to is on this "
    "machine. Allow it only if you started it yourself just now."
)
REGISTRATION_SOURCES = {
    Application.RegistrationSource.DCR: "It registered itself with this server (dynamic registration).",
    Application.RegistrationSource.CIMD: "It is described by a metadata document at its client ID.",
    Application.RegistrationSource.MANUAL: "It was registered by an operator of this server.",
}


class ConsentView(AuthorizationView):
    template_name = "accounts/consent.html"
    form_class = ConsentForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.chosen_membership: Membership | None = None
        self.remembered = False
        # Before the login check, so that signed-out visits count too.
        try:
            authorize_throttle(request=request)
        except RateLimited as refusal:
            back = authorize_refusal_redirect(request=request, refusal=refusal)
            if back is None:
                raise
            return self.redirect(*back)
        return super().dispatch(request, *args, **kwargs)

    def get_form_kwargs(self) -> dict[str, Any]:
        kwargs = super().get_form_kwargs()
        kwargs["user"] = self.request.user
        return kwargs

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        assert isinstance(request.user, User)
        if not membership_list_for_user(user=request.user).exists():
            return render(request, "accounts/no_tenant.html", {"message": NO_TENANT_MESSAGE}, status=403)
        return super().get(request, *args, **kwargs)

    def redirect(self, redirect_to: str, application: Application | None) -> HttpResponse:
        """Every answer sent back to the client carries ``iss`` (RFC 9207 section 2), errors too.

        DOT adds it only to the success redirect it builds; its error redirects (Deny's
        ``access_denied``, a refused scope or PKCE method, ``prompt=none``'s ``consent_required`` and
        ``login_required``) are assembled elsewhere and all leave through here. DOT's own helper
        writes it, so a success redirect that already has it comes out the same.
        """
        if oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS:
            issuer = oauth2_settings.oauth2_authorization_server_issuer(self.request)
            redirect_to = _add_iss_to_redirect(redirect_to, issuer)
        if application is None:
            # DOT passes none for an error found while validating the request, after the client
            # and its redirect URI passed (else it shows a page, not a redirect); the client's own
            # schemes (a private-use cursor://, oauth.redirects) then apply, not only https and http.
            application = application_find(client_id=self._client_id_asked())
        return super().redirect(redirect_to, application)

    def _client_id_asked(self) -> str:
        return str(self.request.GET.get("client_id") or self.request.POST.get("client_id") or "")

    def validate_authorization_request(self, request: HttpRequest) -> tuple[list[str], dict[str, Any]]:
        scopes, credentials = super().validate_authorization_request(request)
        redirect_uri = credentials.get("redirect_uri")
        state = credentials.get("state")
        # oauthlib treats a challenge without a method as "plain"; only S256 is accepted.
        if credentials.get("code_challenge_method") != "S256":
            raise OAuthToolkitError(
                error=InvalidRequestError(description=PKCE_S256_REQUIRED, state=state),
                redirect_uri=redirect_uri,
            )
        refusal = _resource_refusal(request.GET.getlist("resource"))
        if refusal is not None:
            raise OAuthToolkitError(
                error=CustomOAuth2Error(error="invalid_target", description=refusal, state=state),
                redirect_uri=redirect_uri,
            )
        return scopes, credentials

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        assert isinstance(self.request.user, User)
        definitions = scope_definitions()
        requested = [str(scope) for scope in context.get("scopes", [])]
        memberships = list(membership_list_for_user(user=self.request.user))
        application = context.get("application")
        memory = consent_decide(
            requested=requested,
            memberships=memberships,
            remembered=consent_list_for_client(user=self.request.user, application=application)
            if application is not None
            else [],
        )
        context["memory"] = memory
        preselect = memory.preselect_tenant_id or (memberships[0].tenant_id if memberships else None)
        context["memberships"] = [
            {
                "membership": membership,
                "preselected": membership.tenant_id == preselect,
                "granted": [
                    definitions[s] for s in scopes_granted(requested=requested, role=membership.role)
                ],
                "withheld": [
                    definitions[s]
                    for s in requested
                    if s in definitions and s not in scopes_for_role(role=membership.role)
                ],
            }
            for membership in memberships
        ]
        context["requested_scopes"] = [definitions[s] for s in requested if s in definitions]
        # Which resource the token will open; validate_authorization_request allowed only one.
        context["for_api"] = any(is_api_resource(r) for r in self.request.GET.getlist("resource"))
        redirect_uri = context.get("redirect_uri") or ""
        context["redirect_host"] = _host(redirect_uri)
        if application is not None:
            context["loopback_warning"] = LOOPBACK_WARNING if _loopback_only(application) else ""
            context["registration"] = REGISTRATION_SOURCES.get(application.registration_source, "")
        return context

    def render_to_response(self, context: dict[str, Any], **response_kwargs: Any) -> HttpResponse:
        # DOT's get() ends here when it would show the page (its own skip paths stay off:
        # REQUEST_APPROVAL_PROMPT is "force"), so this is where a remembered consent answers instead.
        # Error pages come through here too, without a memory.
        memory: ConsentMemory | None = context.get("memory")
        if memory is None or self.request.method != "GET":
            return super().render_to_response(context, **response_kwargs)
        prompt = set(self.request.GET.get("prompt", "").split())
        if memory.apply is not None and "consent" not in prompt:
            return self.consent_replay(membership=memory.apply, context=context)
        if "none" in prompt:
            error = ConsentRequired(description=CONSENT_REQUIRED, state=context.get("state"))
            return self.error_response(
                OAuthToolkitError(error=error, redirect_uri=context.get("redirect_uri")),
                application=context.get("application"),
            )
        return super().render_to_response(context, **response_kwargs)

    def consent_replay(self, *, membership: Membership, context: dict[str, Any]) -> HttpResponse:
        """Submit the page's own form, filled as the person filled it last time: the very path a
        click on Allow takes (tenant check, role filter, DOT's code, audit), nothing of its own."""
        data = {name: value for name, value in self.get_initial().items() if value}
        data.update(tenant=membership.tenant.slug, allow="on")
        assert isinstance(self.request.user, User)
        form = ConsentForm(data=data, user=self.request.user)
        if not form.is_valid():
            # The tenant went inactive between the two reads: let the person choose.
            return super().render_to_response(context)
        self.remembered = True
        return self.form_valid(form)

    def form_invalid(self, form: ConsentForm) -> HttpResponse:
        # The hidden fields only change if someone edits the form, and the tenant choices are the
        # person's own active tenants, so an invalid form was altered (or its tenant deactivated
        # meanwhile): a plain refusal page, never a redirect to a URI we could not validate.
        tenant_refused = "tenant" in form.errors
        detail: dict[str, Any] = {"fields": sorted(form.errors)}
        if tenant_refused:
            detail["tenant"] = str(form.data.get("tenant", ""))[:100]
        return self.consent_tampered(
            detail=detail, message=TENANT_NOT_AVAILABLE if tenant_refused else REQUEST_ALTERED
        )

    def consent_tampered(self, *, detail: dict[str, Any], message: str) -> HttpResponse:
        audit_record(
            action=AuditAction.CONSENT_TAMPERED,
            outcome=AuditOutcome.DENIED,
            user=self.request.user,
            application=application_find(client_id=str(self.request.GET.get("client_id", ""))),
            detail=detail,
        )
        return render(self.request, ERROR_TEMPLATE, {"message": message}, status=400)

    def form_valid(self, form: ConsentForm) -> HttpResponse:
        altered = consent_form_altered(form=form, query=self.request.GET)
        if altered is not None:
            return self.consent_tampered(detail={"fields": [altered]}, message=REQUEST_ALTERED)
        tenant = form.cleaned_data["tenant"]
        assert isinstance(self.request.user, User)
        # The form only offers the user's own active tenants, so the membership exists.
        self.chosen_membership = membership_get(user=self.request.user, tenant=tenant)
        return super().form_valid(form)

    def create_authorization_response(
        self, request: HttpRequest, scopes: str, credentials: dict[str, Any], allow: bool
    ) -> tuple[str, dict[str, str], str, int]:
        if not allow:
            self.audit_decision(credentials, action=AuditAction.CONSENT_DENIED, scopes=scopes.split())
        else:
            membership = self.chosen_membership
            state = credentials.get("state")
            if membership is None:
                # Only the consent form chooses a tenant; auto-approval paths have none.
                raise OAuthToolkitError(
                    error=AccessDeniedError(description="Consent is required.", state=state),
                    redirect_uri=credentials.get("redirect_uri"),
                )
            if credentials.get("code_challenge_method") != "S256":
                raise OAuthToolkitError(
                    error=InvalidRequestError(description=PKCE_S256_REQUIRED, state=state),
                    redirect_uri=credentials.get("redirect_uri"),
                )
            granted = scopes_granted(requested=scopes.split(), role=membership.role)
            if not granted:
                # The person said yes, but their role allows none of it: refused all the same.
                self.audit_decision(
                    credentials, action=AuditAction.CONSENT_DENIED, scopes=scopes.split(), reason="role"
                )
                raise OAuthToolkitError(
                    error=AccessDeniedError(description=ROLE_GRANTS_NOTHING, state=state),
                    redirect_uri=credentials.get("redirect_uri"),
                )
            scopes = " ".join(granted)
            credentials[TENANT_ATTRIBUTE] = membership.tenant_id
            # A client that names no resource gets a token for the MCP endpoint (what MCP clients
            # that predate RFC 8707 expect), so every token is audience-restricted all the same.
            credentials.setdefault("resource", [settings.MCP_RESOURCE_URL])
            refusal = _resource_refusal(credentials["resource"])
            if refusal is not None:
                raise OAuthToolkitError(
                    error=CustomOAuth2Error(error="invalid_target", description=refusal, state=state),
                    redirect_uri=credentials.get("redirect_uri"),
                )
        uri, headers, body, status = super().create_authorization_response(
            request=request, scopes=scopes, credentials=credentials, allow=allow
        )
        # oauthlib answers some late errors with a redirect carrying ``error``; only a code is consent.
        if "code" in parse_qs(urlsplit(uri or "").query):
            self.audit_decision(credentials, action=AuditAction.CONSENT_GRANTED, scopes=scopes.split())
            self.consent_keep(credentials, scopes=scopes.split())
        return uri, headers, body, status

    def consent_keep(self, credentials: dict[str, Any], *, scopes: list[str]) -> None:
        """Remember the yes that just produced a code, so the same request skips the page next time."""
        membership = self.chosen_membership
        application = application_find(client_id=credentials.get("client_id"))
        # A code exists only after form_valid chose a membership for a signed-in person.
        assert membership is not None
        assert application is not None
        assert isinstance(self.request.user, User)
        consent_remember(
            user=self.request.user, application=application, tenant=membership.tenant, scopes=scopes
        )

    def audit_decision(
        self, credentials: dict[str, Any], *, action: AuditAction, scopes: list[str], reason: str = ""
    ) -> None:
        membership = self.chosen_membership
        detail: dict[str, Any] = {"scopes": scopes}
        if reason:
            detail["reason"] = reason
        if self.remembered:
            detail["remembered"] = True
        audit_record(
            action=action,
            outcome=AuditOutcome.OK if action == AuditAction.CONSENT_GRANTED else AuditOutcome.DENIED,
            user=self.request.user,
            tenant=membership.tenant if membership else None,
            application=application_find(client_id=credentials.get("client_id")),
            detail=detail,
        )


def _resource_refusal(resources: list[str]) -> str | None:
    """Why these resource indicators cannot be granted, or None: each must name the MCP endpoint
    or the API, and all the same one, since a token is bound to exactly one resource."""
    served = {served_resource(resource) for resource in resources}
    if None in served:
        return f"{RESOURCE_NOT_SERVED}, {settings.MCP_RESOURCE_URL} and {settings.API_RESOURCE_URL}."
    if len(served) > 1:
        return ONE_RESOURCE_ONLY
    return None


def _host(uri: str) -> str:
    if is_private_use_redirect(uri):
        # "cursor://anysphere.cursor-mcp", not a bare "anysphere.cursor-mcp" that reads as a website.
        parts = urlsplit(uri)
        return f"{uri_scheme(uri)}://{parts.netloc}" if parts.netloc else f"{uri_scheme(uri)}:"
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    # Without userinfo: "trusted.example@evil.example" must read as evil.example.
    return f"{host}:{parts.port}" if parts.port else host


def _on_this_machine(uri: str) -> bool:
    # A private-use scheme is handed by the browser to an app on this computer, as loopback is.
    return is_loopback_host(urlsplit(uri).hostname, allow_localhost_name=True) or is_private_use_redirect(uri)


def _loopback_only(application: Application) -> bool:
    uris = application.redirect_uris.split()
    return bool(uris) and all(_on_this_machine(uri) for uri in uris)

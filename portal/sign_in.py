"""Sign-in through the tenant's identity provider (``accounts.sign_in``): the sign-in page's
"your organisation" form, a tenant's own link, and the provider's return.

Thin: the flow is ``accounts.sign_in.oidc``, who the person is and their role
``accounts.sign_in.people``. Every end of a flow, signed in or refused, is an audit row; a refusal
is a page saying why, never a 500.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from accounts.models import IdentityProvider
from accounts.selectors import identity_provider_for_email, identity_provider_for_tenant
from accounts.sign_in.oidc import sign_in_finish, sign_in_start
from accounts.sign_in.people import person_sign_in
from core.audit.trail import audit_record
from core.errors import GatehouseError, NotFound
from core.models import AuditAction, AuditOutcome
from oauth.parameter_guard import request_unsafe_parameter

NO_PROVIDER_FOR_DOMAIN = (
    "No organisation signs in with addresses at {domain} here: use your username and password."
)
EMAIL_UNUSABLE = "Enter your work email address, such as ada@example.com."
BACKEND = "django.contrib.auth.backends.ModelBackend"


def _next(request: HttpRequest, value: str) -> str:
    """Where to go after signing in: a path of this site, else the home page."""
    if value and url_has_allowed_host_and_scheme(
        value, allowed_hosts={request.get_host()}, require_https=False
    ):
        return value
    return reverse("home")


def _refused(request: HttpRequest, error: GatehouseError, *, status: int) -> HttpResponse:
    return render(request, "accounts/refused.html", {"message": error.message}, status=status)


@require_POST
def sign_in_by_email(request: HttpRequest) -> HttpResponse:
    """The sign-in page's organisation form: the provider serving the email's domain."""
    problem = request_unsafe_parameter(request)
    email = "" if problem else str(request.POST.get("email", "")).strip()[:254]
    next_url = "" if problem else str(request.POST.get("next", ""))
    login_page = f"{reverse('login')}?next={next_url}" if next_url else reverse("login")
    if problem or "@" not in email:
        messages.error(request, problem or EMAIL_UNUSABLE)
        return HttpResponseRedirect(login_page)
    provider = identity_provider_for_email(email=email)
    if provider is None:
        messages.error(request, NO_PROVIDER_FOR_DOMAIN.format(domain=email.rpartition("@")[2]))
        return HttpResponseRedirect(login_page)
    # A page that goes on by itself, not a redirect: Chromium holds every redirect after a form's
    # submission to the sign-in page's form-action ('self'), and the provider is elsewhere.
    query = urlencode({"next": _next(request, next_url)})
    continue_url = f"{reverse('sign-in-tenant', args=[provider.tenant.slug])}?{query}"
    return render(
        request,
        "accounts/sign_in_continue.html",
        {"provider_name": provider.name, "continue_url": continue_url},
    )


@require_GET
def sign_in_with_tenant(request: HttpRequest, slug: str) -> HttpResponse:
    """A tenant's own link: ``/accounts/sso/<tenant>/``."""
    problem = request_unsafe_parameter(request)
    if problem:
        return render(request, "accounts/refused.html", {"message": problem}, status=400)
    try:
        provider = identity_provider_for_tenant(slug=slug)
    except NotFound as error:
        return _refused(request, error, status=404)
    return _start(request, provider=provider, next_url=str(request.GET.get("next", "")))


def _start(request: HttpRequest, *, provider: IdentityProvider, next_url: str) -> HttpResponse:
    try:
        return sign_in_start(
            request=request,
            provider=provider,
            redirect_uri=f"{settings.PUBLIC_URL}{reverse('sign-in-callback')}",
            next_url=_next(request, next_url),
        )
    except GatehouseError as error:
        return _refused(request, error, status=error.http_status)


@require_GET
def sign_in_callback(request: HttpRequest) -> HttpResponse:
    """The provider's return: the person signed in with their mapped role, or a page saying why not."""
    problem = request_unsafe_parameter(request)
    if problem:
        return render(request, "accounts/refused.html", {"message": problem}, status=400)
    try:
        finished = sign_in_finish(request=request)
        signed_in = person_sign_in(provider_id=finished.provider_id, claims=finished.claims)
    except GatehouseError as error:
        audit_record(
            action=AuditAction.LOGIN_FAILED,
            outcome=AuditOutcome.DENIED,
            detail={"via": "identity_provider", **(error.data or {})},
        )
        return _refused(request, error, status=error.http_status)
    login(request, signed_in.user, backend=BACKEND)
    audit_record(
        action=AuditAction.LOGIN_SUCCEEDED,
        user=signed_in.user,
        tenant=signed_in.tenant,
        detail={
            "via": "identity_provider",
            "provider": finished.provider_id,
            "role": signed_in.role,
            "roleBefore": signed_in.role_before,
            "created": signed_in.created,
        },
    )
    return HttpResponseRedirect(_next(request, finished.next_url))

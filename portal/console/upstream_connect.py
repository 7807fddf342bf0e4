"""A tenant admin connects an upstream that signs in with OAuth (authorization code with PKCE):
Gatehouse sends the admin to the upstream's authorization server and keeps the tokens it is given
(``upstreams.sign_in.connect``).

- ``POST /console/<tenant>/upstreams/<name>/connect/``: the tenant's admins only (``console_change``),
  the tenant's own upstream only (another tenant's is a 404); answers a redirect to the
  authorization server, or the refusal (409 while another admin is connecting it).
- ``GET /console/upstreams/connected/``: the redirect URI, one per deployment; the attempt is found
  by its state alone, and must be the signed-in person's, who must still be the tenant's admin.
  Answers a redirect to the tenant's upstreams page once the tokens are stored (or why not).
- ``GET /console/upstreams/client-metadata.json``: Gatehouse's client metadata document, its client
  id as a URL (CIMD) for authorization servers that support it (an https deployment only).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from accounts.models import User
from core.errors import GatehouseError
from oauth.parameter_guard import request_unsafe_parameter
from portal.console.access import ConsoleTenant
from portal.console.changes import console_change
from upstreams.selectors import upstream_get
from upstreams.sign_in.connect import upstream_connect_deliver, upstream_connect_start, upstream_connect_wait
from upstreams.sign_in.models import AttemptOutcome
from upstreams.sign_in.provider import (
    CLIENT_NAME,
    GRANT_TYPES,
    sign_in_client_metadata_url,
    sign_in_redirect_uri,
)

REFUSED_TEMPLATE = "console/refused.html"
# How long the callback waits for the token exchange (on whichever worker started it) before
# answering anyway.
CALLBACK_WAIT_SECONDS = 20.0
CONNECTED = "{name} is connected: Gatehouse signed in to it."
STILL_CONNECTING = "{name}: the sign-in was received; the connection is still being completed."
CONNECT_FAILED = "Connecting {name} failed: {error}"


def _refused(
    request: HttpRequest, console: ConsoleTenant, *, error: str = "", status: int = 400
) -> HttpResponse:
    return render(request, REFUSED_TEMPLATE, {"message": error}, status=status)


@console_change(page=_refused)
def upstream_connect_view(request: HttpRequest, console: ConsoleTenant, name: str) -> HttpResponse:
    upstream = upstream_get(tenant=console.tenant, name=name[:200])
    url = upstream_connect_start(upstream=upstream, by=console.person)
    return HttpResponseRedirect(url)


@never_cache
@login_required
@require_GET
def upstream_connect_callback(request: HttpRequest) -> HttpResponse:
    problem = request_unsafe_parameter(request)
    if problem is not None:
        return render(request, REFUSED_TEMPLATE, {"message": problem}, status=400)
    person = request.user
    assert isinstance(person, User)  # login_required
    try:
        grant = upstream_connect_deliver(
            user=person,
            state=request.GET.get("state", ""),
            code=request.GET.get("code", ""),
            iss=request.GET.get("iss"),
            error=request.GET.get("error"),
        )
    except GatehouseError as error:
        return render(request, REFUSED_TEMPLATE, {"message": error.message}, status=error.http_status)
    grant = upstream_connect_wait(grant=grant, seconds=CALLBACK_WAIT_SECONDS)
    name = grant.upstream.name
    if grant.attempt_outcome == AttemptOutcome.CONNECTED:
        messages.success(request, CONNECTED.format(name=name))
    elif grant.attempt_outcome == AttemptOutcome.FAILED:
        messages.error(request, CONNECT_FAILED.format(name=name, error=grant.attempt_error))
    else:
        messages.info(request, STILL_CONNECTING.format(name=name))
    return redirect("console:upstreams", slug=grant.upstream.tenant.slug)


@require_GET
def upstream_client_metadata(request: HttpRequest) -> HttpResponse:
    client_id = sign_in_client_metadata_url()
    if client_id is None:
        raise Http404
    return JsonResponse(
        {
            "client_id": client_id,
            "client_name": CLIENT_NAME,
            "redirect_uris": [sign_in_redirect_uri()],
            "grant_types": GRANT_TYPES,
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",
        }
    )


urlpatterns: list[URLPattern] = [
    path("<slug:slug>/upstreams/<str:name>/connect/", upstream_connect_view, name="upstream-connect"),
    path("upstreams/connected/", upstream_connect_callback, name="upstream-connected"),
    path("upstreams/client-metadata.json", upstream_client_metadata, name="upstream-client-metadata"),
]

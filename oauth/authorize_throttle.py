"""The authorization endpoint's limit, counted once per sign-in, and its refusal sent to the client.

A sign-in reaches ``/oauth/authorize/`` about three times: the request itself, its return from the
login page, and the consent form's answer. Counted each time, the limit (``RATE_LIMIT_AUTHORIZE``,
10 a minute per address) let a person sign in three times a minute. So an authorization request
is counted once, by its PKCE challenge (every request here has one): the first request of a
challenge is counted and remembered in the person's session (which survives the login), and up to
``FOLLOW_UPS`` more requests of the same challenge in that session are not. Any other request,
or one without a session, is counted.

On a development machine (``PUBLIC_URL`` and the request both loopback) nothing is counted, as
for registration (``core.throttles``).

A refused request whose client and redirect URI are known goes back to the client as an OAuth
error redirect (``temporarily_unavailable``, RFC 6749 section 4.1.2.1), with its ``state`` and
the issuer, so the client stops waiting and can say why; otherwise the refusal is the 429 page.
"""

from __future__ import annotations

from django.http import HttpRequest
from oauth2_provider.models import Application
from oauthlib.common import add_params_to_uri

from core.errors import RateLimited
from core.models import RateLimitScope
from core.throttles import client_address, throttle_check
from oauth.selectors import application_find

SESSION_KEY = "gatehouse_authorize_counted"
# Requests of one authorization after its first: the return from login, the consent form, a reload.
FOLLOW_UPS = 3
TEMPORARILY_UNAVAILABLE = "temporarily_unavailable"
TOO_MANY = "Too many authorization requests from this address; try again in {seconds} seconds."
_CHALLENGE_MAX = 128


def authorize_throttle(*, request: HttpRequest) -> None:
    """Count this request against the authorization limit unless it follows one already counted
    for the same sign-in; raises ``RateLimited`` (audited) when over it."""
    challenge = str(request.GET.get("code_challenge") or request.POST.get("code_challenge") or "")
    challenge = challenge[:_CHALLENGE_MAX]
    session = request.session
    counted = session.get(SESSION_KEY)
    if challenge and isinstance(counted, list) and len(counted) == 2 and counted[0] == challenge:
        follow_ups = int(counted[1]) if isinstance(counted[1], int) else FOLLOW_UPS
        if follow_ups < FOLLOW_UPS:
            session[SESSION_KEY] = [challenge, follow_ups + 1]
            return
    throttle_check(
        request=request,
        scope=RateLimitScope.AUTHORIZE,
        key=client_address(),
        client_id=_client_id(request),
    )
    if challenge:
        session[SESSION_KEY] = [challenge, 0]


def authorize_refusal_redirect(
    *, request: HttpRequest, refusal: RateLimited
) -> tuple[str, Application] | None:
    """Where to send the client a refusal: its redirect URI with ``error`` and ``state``, when
    the request names a registered client and one of its redirect URIs (else None: a page)."""
    application = application_find(client_id=_client_id(request))
    if application is None:
        return None
    redirect_uri = str(request.GET.get("redirect_uri") or request.POST.get("redirect_uri") or "")
    if not redirect_uri:
        registered = application.redirect_uris.split()
        if len(registered) != 1:
            return None
        redirect_uri = registered[0]
    elif not application.redirect_uri_allowed(redirect_uri):
        return None
    params = [
        ("error", TEMPORARILY_UNAVAILABLE),
        ("error_description", TOO_MANY.format(seconds=refusal.retry_after_seconds)),
    ]
    state = request.GET.get("state") or request.POST.get("state")
    if state:
        params.append(("state", str(state)))
    return add_params_to_uri(redirect_uri, params), application


def _client_id(request: HttpRequest) -> str:
    return str(request.GET.get("client_id") or request.POST.get("client_id") or "")

"""The Content-Security-Policy header (django-csp), and the one allowance the OAuth flow needs.

The policy itself is ``CONTENT_SECURITY_POLICY`` in config/settings.py: nothing but our own scripts,
styles and images, no plugins, no framing, no ``<base>``, and forms that post only to us.

``form-action 'self'`` alone would break the authorization flow in Chromium, which applies
``form-action`` to every redirect that follows a form's submission: the consent form posts to us and
we redirect to the client's redirect URI, and the sign-in form may end there too (consent already
given). So a page that is part of an authorization request (the consent page, and the sign-in page
whose ``next`` is one) also allows the redirect URI's origin (or scheme, for an app's private-use
scheme), and only when that URI is registered for that client, as DOT checks it: a crafted link
cannot widen the policy to an address of its choosing.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from csp.middleware import CSPMiddleware, PolicyParts
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponseBase
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from oauth2_provider.models import get_application_model

from core.uri_schemes import private_use_scheme_refusal

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_HOST = re.compile(r"[a-z0-9.-]+|\[[0-9a-f:.]+\]")
_WEB_SCHEMES = frozenset({"http", "https"})


def redirect_source(redirect_uri: str) -> str | None:
    """``redirect_uri`` as a CSP source: its origin for http(s), its scheme otherwise; None when it
    cannot be expressed safely (a source list is split on whitespace and ``;``), or is a scheme
    that is never a redirect's (``javascript:``, ``data:``: a row stored around the policy)."""
    try:
        parts = urlsplit(redirect_uri)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not _SCHEME.fullmatch(scheme):
        return None
    if scheme not in _WEB_SCHEMES:
        return f"{scheme}:" if private_use_scheme_refusal(scheme) is None else None
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    if not _HOST.fullmatch(host):
        return None
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "")


def _authorization_query(request: HttpRequest) -> dict[str, list[str]] | None:
    authorize_path = reverse("oauth2_provider:authorize")
    if request.path == authorize_path:
        return parse_qs(request.META.get("QUERY_STRING", ""))
    try:
        next_url = request.POST.get("next") if request.method == "POST" else request.GET.get("next")
    except (MultiPartParserError, SuspiciousOperation, ValueError):
        # A body the view could not read either; its answer needs no allowance.
        return None
    if next_url:
        target = urlsplit(next_url)
        if target.path == authorize_path and not target.netloc:
            return parse_qs(target.query)
    return None


def authorization_redirect_source(request: HttpRequest) -> str | None:
    """The CSP source of the registered redirect URI of the authorization request this page serves."""
    query = _authorization_query(request)
    if query is None:
        return None
    client_id = query.get("client_id", [""])[0]
    redirect_uri = query.get("redirect_uri", [""])[0]
    if not client_id or not redirect_uri or "\x00" in client_id + redirect_uri:
        return None
    application: Any = get_application_model().objects.filter(client_id=client_id).first()
    if application is None or not application.redirect_uri_allowed(redirect_uri):
        return None
    return redirect_source(redirect_uri)


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, with the authorization flow's redirect URI in ``form-action``."""

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        # Only a page with a form matters; redirects and errors need no allowance (nor the lookup).
        if response.status_code == 200 and "text/html" in response.get("Content-Type", ""):
            source = authorization_redirect_source(request)
            if source is not None:
                parts.update = {**(parts.update or {}), "form-action": [source]}
        return parts

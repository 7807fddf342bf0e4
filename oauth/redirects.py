"""Which redirect URIs a client may send people back to.

Three rules, checked in this order at every authorization request (``validate_redirect_uri``):

1. **Transport**: ``https``, or plain ``http`` only to a loopback host (OAuth 2.1: a code sent over
   plain HTTP to another machine can be read on the way), or a native app's private-use scheme
   (RFC 8252 §7.1, ``cursor://...``) that ``core.uri_schemes`` and the operator's
   ``OAUTH_PRIVATE_USE_SCHEMES`` allow: the browser hands it to an app on the same machine. Checked
   at every request, so a scheme the operator stops allowing is refused to clients that hold it.
2. **Exact match** with one of the client's registered URIs, character for character (OAuth 2.1 /
   RFC 9700 simple string comparison: no case folding, no trailing-slash or query leniency), except
   that a loopback redirect (``http://127.0.0.1``, ``http://[::1]``, and ``http://localhost`` while
   DOT's ``ALLOW_LOCALHOST_LOOPBACK`` is on) matches on any port (RFC 8252 §7.3). DOT's own check
   runs too; it refuses fragments and userinfo and compares the parsed parts, and it grants the
   port exemption only to those three spellings, so another loopback address (``127.0.0.2``, see
   ``core.loopback``) is held to the port it registered. A private-use URI has no exemption at all.
3. **Operator patterns** (``RedirectUriPattern``) for registered clients (manual and dynamic
   registration), never for a client ID metadata document, whose redirect URIs are the document's
   own. What a pattern may say and what it matches is ``oauth.redirect_patterns`` (https or
   loopback http only, so never a private-use URI).

The redirect itself is DOT's (``OAuth2ResponseRedirect``), which refuses any scheme that
``Application.get_allowed_schemes()`` does not list; ``redirect_schemes_allowed`` is that list for
one client: ``https``, ``http``, and the private-use schemes of its own registered URIs, so no
client is ever sent through a scheme it did not register (``oauth.apps`` installs it).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.db.models import Q
from oauth2_provider.models import Application, check_redirect_to_uri_allowed
from oauth2_provider.settings import oauth2_settings

from core.conf import gatehouse_settings
from core.loopback import is_loopback_host
from core.uri_schemes import private_use_scheme_permitted, uri_scheme
from oauth.models import RedirectUriPattern
from oauth.redirect_patterns import redirect_pattern_matches


def _loopback_any_port(host: str | None) -> bool:
    # `localhost` is not a loopback IP literal (RFC 8252 §8.3 advises against it), but MCP clients
    # such as Claude Code and the SDK's examples register http://localhost:<port>/callback; DOT's
    # ALLOW_LOCALHOST_LOOPBACK decides, as it does in DOT's own check.
    return is_loopback_host(host, allow_localhost_name=oauth2_settings.ALLOW_LOCALHOST_LOOPBACK)


def _private_use_scheme(uri: str) -> str | None:
    """The scheme of ``uri`` when it is a private-use scheme (RFC 8252 §7.1) the operator allows."""
    scheme = uri_scheme(uri)
    if scheme is not None and private_use_scheme_permitted(
        scheme, allowed=gatehouse_settings.OAUTH_PRIVATE_USE_SCHEMES
    ):
        return scheme
    return None


def is_private_use_redirect(uri: str) -> bool:
    """Is ``uri`` in a private-use scheme (RFC 8252 §7.1) that the operator allows?"""
    return _private_use_scheme(uri) is not None


def redirect_transport_is_safe(uri: str) -> bool:
    """https, plain http to this machine only, or a private-use scheme the operator allows."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    if parts.scheme == "https":
        return bool(parts.hostname)
    if parts.scheme == "http":
        return is_loopback_host(parts.hostname, allow_localhost_name=True)
    return is_private_use_redirect(uri)


def redirect_schemes_allowed(*, application: Application) -> list[str]:
    """The schemes DOT may redirect this client's browser to (``get_allowed_schemes``): DOT's
    ``ALLOWED_REDIRECT_URI_SCHEMES`` (https and http), and the private-use schemes of the client's
    own registered URIs that the operator allows."""
    schemes = [scheme.lower() for scheme in oauth2_settings.ALLOWED_REDIRECT_URI_SCHEMES]
    for uri in application.redirect_uris.split():
        scheme = _private_use_scheme(uri)
        # Lower case: DOT compares with urlparse's scheme, which is lower-cased.
        if scheme is not None and scheme.lower() not in schemes:
            schemes.append(scheme.lower())
    return schemes


def _without_loopback_port(uri: str) -> str:
    """The URI as written, with the port of a loopback authority taken out (RFC 8252 §7.3)."""
    parts = urlsplit(uri)
    if parts.scheme != "http" or not _loopback_any_port(parts.hostname):
        return uri
    start = uri.find("//") + 2
    netloc = parts.netloc
    # "[::1]:8080" -> "[::1]"; "127.0.0.1:" (an empty port) -> "127.0.0.1".
    if parts.port is not None or netloc.endswith(":"):
        netloc = netloc[: netloc.rfind(":")]
    return uri[:start] + netloc + uri[start + len(parts.netloc) :]


def _exactly_registered(uri: str, registered: list[str]) -> bool:
    # DOT's check parses and compares each part (and refuses fragments and userinfo); ours then
    # insists on the very same characters, which DOT's parsing would forgive in scheme and host case.
    allowed, _reasons = check_redirect_to_uri_allowed(uri, registered)
    if not allowed:
        return False
    bare = _without_loopback_port(uri)
    return any(_without_loopback_port(candidate) == bare for candidate in registered)


def _origin(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    return parts.scheme, parts.netloc


def redirect_patterns_for(*, application: Application) -> list[str]:
    """The operator patterns that may apply to this client: its own, and the global ones."""
    rows = RedirectUriPattern.objects.filter(Q(application__isnull=True) | Q(application=application))
    registered_origins = {_origin(uri) for uri in application.redirect_uris.split()}
    # A global pattern widens the paths a client may use on an origin it registered itself; it
    # never lends a client an origin it did not register. A pattern tied to the client is the
    # operator's explicit word and needs no such anchor.
    return [
        row.pattern
        for row in rows
        if row.application_id is not None or _origin(row.pattern) in registered_origins
    ]


def redirect_uri_permitted(*, application: Application, redirect_uri: str) -> bool:
    """May this client's authorization response be sent to ``redirect_uri``?"""
    try:
        if not redirect_transport_is_safe(redirect_uri):
            return False
        if _exactly_registered(redirect_uri, application.redirect_uris.split()):
            return True
    except ValueError:
        # urlsplit refuses malformed authorities (a port that is not a number, a broken IPv6 literal).
        return False
    if application.registration_source == Application.RegistrationSource.CIMD:
        return False
    return any(
        redirect_pattern_matches(pattern=pattern, uri=redirect_uri)
        for pattern in redirect_patterns_for(application=application)
    )

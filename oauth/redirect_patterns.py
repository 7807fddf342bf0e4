"""The operators' redirect URI patterns: what a pattern may say, and which URIs it matches.

A pattern is a URI whose path segments may be ``*``, matching exactly one segment made of URL-safe
characters: ``https://chatgpt.com/connector/oauth/*`` admits each connector's callback and nothing
below or beside it. There are no regular expressions and no host wildcards. Which patterns apply to
which client is ``oauth.redirects``.

Kept out of ``oauth.redirects``, which reads the ``RedirectUriPattern`` model: the model validates its
field with ``redirect_pattern_validate``, so the two modules would otherwise import each other.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from core.loopback import is_loopback_host

WILDCARD = "*"
# One path segment of a redirect that a pattern's "*" admits: unreserved characters only, so a
# wildcard can never smuggle a "/", a "%2F", a ";param", a "?" or a "#".
_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")

PATTERN_SCHEME = "A redirect pattern must start with https:// (or http:// on a loopback host)."
PATTERN_HOST = "A redirect pattern needs a host in lower case, with no wildcard, user or password."
PATTERN_PATH = "A redirect pattern needs a path; '*' may only stand for a whole path segment."
PATTERN_EXTRA = "A redirect pattern may not have a query or a fragment."


def redirect_pattern_matches(*, pattern: str, uri: str) -> bool:
    if "#" in uri or "?" in uri:
        return False
    wanted, given = urlsplit(pattern), urlsplit(uri)
    if (wanted.scheme, wanted.netloc) != (given.scheme, given.netloc):
        return False
    # Compared on the raw string too, so "HTTPS://Host" spelled differently never matches.
    if not uri.startswith(f"{wanted.scheme}://{wanted.netloc}/"):
        return False
    wanted_segments, given_segments = wanted.path.split("/"), given.path.split("/")
    if len(wanted_segments) != len(given_segments):
        return False
    for expected, actual in zip(wanted_segments, given_segments, strict=True):
        if expected == WILDCARD:
            if not _SEGMENT.fullmatch(actual) or actual in {".", ".."}:
                return False
        elif expected != actual:
            return False
    return True


def redirect_pattern_validate(value: str) -> None:
    """Field validator for ``RedirectUriPattern.pattern``: refuse anything that is not a plain URI
    with whole-segment wildcards on an https (or loopback http) origin."""
    parts = urlsplit(value)
    host = parts.hostname
    if parts.scheme not in {"https", "http"} or (
        parts.scheme == "http" and not is_loopback_host(host, allow_localhost_name=True)
    ):
        raise ValidationError(PATTERN_SCHEME)
    if not host or WILDCARD in parts.netloc or "@" in parts.netloc or parts.netloc != parts.netloc.lower():
        raise ValidationError(PATTERN_HOST)
    try:
        _ = parts.port
    except ValueError as exc:
        raise ValidationError(PATTERN_HOST) from exc
    if "?" in value or "#" in value:
        raise ValidationError(PATTERN_EXTRA)
    segments = parts.path.split("/")
    if not parts.path.startswith("/") or any(
        WILDCARD in segment and segment != WILDCARD for segment in segments
    ):
        raise ValidationError(PATTERN_PATH)
    if any(segment in {".", ".."} for segment in segments):
        raise ValidationError(PATTERN_PATH)

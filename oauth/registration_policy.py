"""What a client may register: one policy for dynamic registration (RFC 7591), its management
endpoint (RFC 7592 PUT) and client ID metadata documents, so no door lets in what another refuses.

Registration is open to anyone (consent is what protects people), so everything a client sends is
bounded before DOT sees it, and refused in the RFC 7591 error shape (``invalid_client_metadata``,
``invalid_redirect_uri``), never a 500:

- **The body**: at most ``OAUTH_REGISTRATION_MAX_BODY_BYTES`` (413), strict UTF-8, JSON nested no
  deeper than ``core.json_bounds`` allows, a JSON object, and no NUL or unpaired surrogate in any
  string (PostgreSQL would refuse the row with a 500).
- **Redirect URIs**: at most ``OAUTH_CLIENT_MAX_REDIRECT_URIS``, each at most
  ``OAUTH_CLIENT_MAX_REDIRECT_URI_LENGTH`` characters; https, plain http to a loopback host, or a
  native app's private-use scheme the operator allows (``oauth.redirects``, ``core.uri_schemes``),
  in the shape DOT's model will check on save (``cursor://host/path`` or ``com.example.app:/path``),
  checked here first so that its refusal is ``invalid_redirect_uri`` too; no user or password in
  the authority (a URI that reads as one host and sends to another), no fragment (RFC 6749
  §3.1.2), no whitespace, control characters, NUL or unpaired surrogate (DOT stores the list
  space-separated, so a space would split one URI into two). These are judged before the
  metadata's other strings, so a NUL in a redirect URI is an ``invalid_redirect_uri`` as well.
- **Grant types**: ``authorization_code`` and ``refresh_token`` only, for public and confidential
  clients alike. The server advertises only these two; ``implicit`` and ``password`` are gone from
  OAuth 2.1; ``client_credentials`` would hand an anonymous registrant tokens that no person
  consented to, and every Gatehouse token acts for a person in a tenant. ``response_types``, when
  sent, may only be ``code``.
- **Other strings**: ``client_name`` at most ``OAUTH_CLIENT_MAX_NAME_LENGTH`` characters, every
  other string anywhere in the metadata at most ``OAUTH_CLIENT_MAX_METADATA_STRING_LENGTH``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from oauth2_provider.validators import AllowedURIValidator

from core.conf import gatehouse_settings
from core.errors import InvalidInput
from core.json_bounds import JsonTooDeep, json_loads_bounded
from core.text_safety import text_is_storable, text_unstorable_reason
from oauth.redirects import is_private_use_redirect, redirect_transport_is_safe

INVALID_CLIENT_METADATA = "invalid_client_metadata"
INVALID_REDIRECT_URI = "invalid_redirect_uri"

BODY_TOO_LARGE = "The registration request is larger than {limit} bytes."
NOT_UTF8 = "The registration request must be JSON in UTF-8."
NOT_JSON = "The registration request must be valid JSON."
TOO_DEEP = "The registration request nests deeper than {limit} levels."
NOT_OBJECT = "The registration request must be a JSON object."
UNSTORABLE = "The client metadata {reason}."
TOO_MANY_REDIRECT_URIS = "A client may register at most {limit} redirect URIs."
REDIRECT_URI_TOO_LONG = "A redirect URI may be at most {limit} characters long."
UNSAFE_REDIRECT = (
    "Redirect URIs must use https, plain http to a loopback address, or an app's own private-use "
    "scheme that this server allows (never one with a meaning in browsers or systems, such as "
    "javascript or file):"
)
UNSAFE_REDIRECT_WEB_ONLY = "Redirect URIs must use https, or plain http to a loopback address only:"
PRIVATE_USE_SHAPE = (
    "A private-use redirect URI must be scheme://host/path or scheme:/path, with no empty host:"
)
REDIRECT_USERINFO = "A redirect URI may not carry a user name or password."
REDIRECT_FRAGMENT = "A redirect URI may not have a fragment:"
REDIRECT_WHITESPACE = "A redirect URI may not contain spaces, control characters or unpaired surrogates."
GRANT_TYPE_REFUSED = "Only the authorization_code and refresh_token grant types are allowed, not {grant!r}."
RESPONSE_TYPE_REFUSED = "Only the code response type is allowed, not {value!r}."
NAME_TOO_LONG = "client_name may be at most {limit} characters long."
STRING_TOO_LONG = "{field} may be at most {limit} characters long."

ALLOWED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
ALLOWED_RESPONSE_TYPES = frozenset({"code"})
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")


class ClientMetadataRefused(InvalidInput):
    """Metadata the policy refuses; answered in the RFC 7591 §3.2.2 shape (``core.http_errors``)."""

    http_status = 400
    oauth_error = INVALID_CLIENT_METADATA


class RedirectUriRefused(ClientMetadataRefused):
    oauth_error = INVALID_REDIRECT_URI


class RegistrationTooLarge(ClientMetadataRefused):
    http_status = 413


def registration_body_parse(*, body: bytes) -> dict[str, Any]:
    """The registration request's metadata, or ``ClientMetadataRefused`` saying what is wrong."""
    limit = gatehouse_settings.OAUTH_REGISTRATION_MAX_BODY_BYTES
    if len(body) > limit:
        raise RegistrationTooLarge(BODY_TOO_LARGE.format(limit=limit))
    try:
        # Strictly UTF-8 (RFC 8259 §8.1): json.loads on bytes would also take UTF-16 and let
        # encoded surrogates through.
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientMetadataRefused(NOT_UTF8) from exc
    try:
        metadata = json_loads_bounded(text)
    except JsonTooDeep as exc:
        raise ClientMetadataRefused(TOO_DEEP.format(limit=exc.max_depth)) from exc
    except ValueError as exc:
        raise ClientMetadataRefused(NOT_JSON) from exc
    if not isinstance(metadata, dict):
        raise ClientMetadataRefused(NOT_OBJECT)
    return metadata


def registration_request_check(request: HttpRequest) -> dict[str, Any]:
    """The metadata of a registration or update request, checked against the whole policy."""
    limit = gatehouse_settings.OAUTH_REGISTRATION_MAX_BODY_BYTES
    # Refused on its declared length before the body is read (Django would refuse a body over
    # DATA_UPLOAD_MAX_MEMORY_SIZE with a page of its own); a body without one is measured.
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise RegistrationTooLarge(BODY_TOO_LARGE.format(limit=limit))
    metadata = registration_body_parse(body=request.body)
    client_metadata_check(metadata)
    return metadata


# RFC 7591 §2 fields by JSON type. DOT checks some of them itself, but lets others through to
# the database (``"client_name": null`` reached a NOT NULL column), so the types are judged here.
STRING_FIELDS = frozenset(
    {
        "client_name",
        "client_uri",
        "logo_uri",
        "tos_uri",
        "policy_uri",
        "jwks_uri",
        "scope",
        "token_endpoint_auth_method",
        "software_id",
        "software_version",
    }
)
STRING_LIST_FIELDS = frozenset({"redirect_uris", "grant_types", "response_types", "contacts"})
WRONG_TYPE = "{field} must be {kind}."


def _types_check(metadata: dict[str, Any]) -> None:
    for field, value in metadata.items():
        if field in STRING_FIELDS and not isinstance(value, str):
            raise ClientMetadataRefused(WRONG_TYPE.format(field=field, kind="a string"))
        if field in STRING_LIST_FIELDS and not (
            isinstance(value, list) and all(isinstance(item, str) for item in value)
        ):
            raise ClientMetadataRefused(WRONG_TYPE.format(field=field, kind="an array of strings"))


def client_metadata_check(metadata: dict[str, Any]) -> None:
    """Apply the policy to parsed client metadata (a registration, an update or a document)."""
    # Types, then redirect URIs, before any message could echo an unstorable string: the type
    # messages name fixed fields only, and a redirect URI holding NUL is refused without an echo.
    _types_check(metadata)
    uris = metadata.get("redirect_uris")
    if isinstance(uris, list):
        _redirect_uris_check([uri for uri in uris if isinstance(uri, str)], count=len(uris))
    reason = text_unstorable_reason(metadata)
    if reason is not None:
        raise ClientMetadataRefused(UNSTORABLE.format(reason=reason))
    _strings_check(metadata)
    grant_types = metadata.get("grant_types")
    if isinstance(grant_types, list):
        for grant in grant_types:
            if isinstance(grant, str) and grant not in ALLOWED_GRANT_TYPES:
                raise ClientMetadataRefused(GRANT_TYPE_REFUSED.format(grant=grant[:100]))
    response_types = metadata.get("response_types")
    if isinstance(response_types, list):
        for value in response_types:
            if isinstance(value, str) and value not in ALLOWED_RESPONSE_TYPES:
                raise ClientMetadataRefused(RESPONSE_TYPE_REFUSED.format(value=value[:100]))


def _strings_check(metadata: dict[str, Any]) -> None:
    name = metadata.get("client_name")
    name_limit = gatehouse_settings.OAUTH_CLIENT_MAX_NAME_LENGTH
    if isinstance(name, str) and len(name) > name_limit:
        raise ClientMetadataRefused(NAME_TOO_LONG.format(limit=name_limit))
    limit = gatehouse_settings.OAUTH_CLIENT_MAX_METADATA_STRING_LENGTH
    # Redirect URIs have their own bound and client_name its own; every other string has this one.
    stack: list[tuple[str, Any]] = [
        (str(key), value) for key, value in metadata.items() if key not in {"client_name", "redirect_uris"}
    ]
    while stack:
        field, value = stack.pop()
        if isinstance(value, str):
            if len(value) > limit:
                raise ClientMetadataRefused(STRING_TOO_LONG.format(field=field[:100], limit=limit))
        elif isinstance(value, dict):
            stack.extend((str(key), item) for key, item in value.items())
            stack.extend((field, str(key)) for key in value)
        elif isinstance(value, list):
            stack.extend((field, item) for item in value)


def _redirect_uris_check(uris: list[str], *, count: int) -> None:
    most = gatehouse_settings.OAUTH_CLIENT_MAX_REDIRECT_URIS
    if count > most:
        raise ClientMetadataRefused(TOO_MANY_REDIRECT_URIS.format(limit=most))
    longest = gatehouse_settings.OAUTH_CLIENT_MAX_REDIRECT_URI_LENGTH
    for uri in uris:
        refusal = redirect_uri_refusal(uri, max_length=longest)
        if refusal is not None:
            raise RedirectUriRefused(refusal)


def redirect_uri_refusal(uri: str, *, max_length: int) -> str | None:
    """Why ``uri`` may not be registered as a redirect URI, or None."""
    if len(uri) > max_length:
        return REDIRECT_URI_TOO_LONG.format(limit=max_length)
    if _SPACE_OR_CONTROL.search(uri) or not text_is_storable(uri):
        return REDIRECT_WHITESPACE  # not echoed: the error and its audit row would carry it
    if not redirect_transport_is_safe(uri):
        allowed = gatehouse_settings.OAUTH_PRIVATE_USE_SCHEMES
        return f"{UNSAFE_REDIRECT if allowed else UNSAFE_REDIRECT_WEB_ONLY} {uri}"
    parts = urlsplit(uri)  # parsed already by the transport check, which refuses what cannot be
    if "@" in parts.netloc:
        return REDIRECT_USERINFO  # not echoed: it may hold a password
    if "#" in uri:
        return f"{REDIRECT_FRAGMENT} {uri}"
    if is_private_use_redirect(uri) and not _dot_accepts_private_use(uri, scheme=parts.scheme):
        return f"{PRIVATE_USE_SHAPE} {uri}"
    return None


def _dot_accepts_private_use(uri: str, *, scheme: str) -> bool:
    # DOT's model validator (Application.clean) is the one that will judge the URI on save; asking
    # it here turns its refusal (an opaque "cursor:cb", "cursor:///cb", "cursor://", a host DOT
    # cannot parse) into this policy's invalid_redirect_uri rather than DOT's invalid_client_metadata.
    validator = AllowedURIValidator({scheme}, name="redirect uri", allow_path=True, allow_query=True)
    try:
        validator(uri)
    except ValidationError:
        return False
    return True

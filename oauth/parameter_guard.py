"""Refuse OAuth and sign-in parameters that no lookup could survive: a NUL or invalid UTF-8.

Django decodes a query string or form body with ``errors="replace"``, so invalid UTF-8 arrives as
U+FFFD and a NUL arrives as itself; the first database lookup with either (a client ID, a code, a
username) then fails in PostgreSQL, which refuses NUL in ``text``, and the request ends in a 500.
oauthlib re-reads the raw query too, so checking Django's decoded values would not be enough.

So the raw bytes are checked once, before any view: every name and value of the query string, of
a form-encoded body and of HTTP Basic client credentials (of a multipart body, which Django
decodes itself, for NUL only). ``OAuthParameterGuardMiddleware`` answers the OAuth endpoints in
their own error shape (JSON ``invalid_request`` for the token and revocation endpoints; a plain
page for the authorization endpoint, never a redirect to a URI that was not validated); the
sign-in view calls ``request_unsafe_parameter`` itself, to answer with its own form.
Registration (``/oauth/register/``) takes JSON and checks its own body.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from functools import cache
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.deprecation import MiddlewareMixin

from core.http_errors import ERROR_TEMPLATE

PARAMETER_HAS_NUL = "The {name} parameter contains a NUL character."
PARAMETER_NOT_UTF8 = "The {name} parameter is not valid UTF-8."
PARAMETER_NAME_UNSAFE = "A parameter name contains a NUL character or is not valid UTF-8."
FORM_UNREADABLE = "The form body could not be read."
# Django refuses larger bodies and more fields with its own HTML 400 page, wherever the body is
# first read; the guard reads it first, so the answer is the endpoint's own shape.
FORM_TOO_LARGE = "The form is too large ({limit} bytes at most)."
FORM_TOO_MANY_FIELDS = "The form has too many fields ({limit} at most)."
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
MULTIPART_CONTENT_TYPE = "multipart/form-data"


def _decoded(raw: bytes) -> str | None:
    """The text of percent-decoded bytes, or None if it is not UTF-8 or holds a NUL."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def _pairs(raw: str | bytes) -> Iterator[tuple[bytes, bytes]]:
    """Name and value of each ``&``-separated pair, percent-decoded to bytes as Django reads them."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name, _, value = pair.partition(b"=")
        yield unquote_to_bytes(name.replace(b"+", b" ")), unquote_to_bytes(value.replace(b"+", b" "))


def _pair_problem(name: bytes, value: bytes) -> str | None:
    text_name = _decoded(name)
    if text_name is None:
        return PARAMETER_NAME_UNSAFE
    if _decoded(value) is not None:
        return None
    shown = repr(text_name[:40])
    if b"\x00" in value:
        return PARAMETER_HAS_NUL.format(name=shown)
    return PARAMETER_NOT_UTF8.format(name=shown)


def _basic_credentials(request: HttpRequest) -> Iterator[tuple[bytes, bytes]]:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return
    try:
        decoded = base64.b64decode(credentials, validate=True)
    except (binascii.Error, ValueError):
        return  # Not credentials at all: DOT refuses them as invalid_client.
    client_id, _, secret = decoded.partition(b":")
    # RFC 6749 2.3.1: both halves are form-encoded before they are joined.
    yield b"client_id", unquote_to_bytes(client_id.replace(b"+", b" "))
    yield b"client_secret", unquote_to_bytes(secret.replace(b"+", b" "))


def _multipart_fields(request: HttpRequest) -> Iterator[tuple[bytes, bytes]]:
    # Django has already decoded these (invalid UTF-8 became U+FFFD, which any column stores);
    # only a NUL can still reach the database. Uploaded files are no parameters.
    for name, values in request.POST.lists():
        for value in values:
            yield name.encode("utf-8", "surrogatepass"), value.encode("utf-8", "surrogatepass")


def request_unsafe_parameter(request: HttpRequest) -> str | None:
    """Why a parameter of this request cannot be used (a message for the caller), else None."""
    sources: list[Iterator[tuple[bytes, bytes]]] = [_pairs(request.META.get("QUERY_STRING", ""))]
    try:
        if request.method == "POST" and request.content_type == FORM_CONTENT_TYPE:
            body = request.body
            most = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
            if most is not None and body.count(b"&") >= most:
                return FORM_TOO_MANY_FIELDS.format(limit=most)
            sources.append(_pairs(body))
        elif request.method == "POST" and request.content_type == MULTIPART_CONTENT_TYPE:
            sources.append(iter(list(_multipart_fields(request))))
    except RequestDataTooBig:
        return FORM_TOO_LARGE.format(limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    except MultiPartParserError:
        return FORM_UNREADABLE
    sources.append(_basic_credentials(request))
    for source in sources:
        for name, value in source:
            problem = _pair_problem(name, value)
            if problem is not None:
                return problem
    return None


@cache
def _guarded_paths() -> dict[str, bool]:
    """Each guarded OAuth path, and whether a person's browser (not a client) calls it."""
    return {
        reverse("oauth2_provider:authorize"): True,
        reverse("oauth2_provider:token"): False,
        reverse("oauth2_provider:revoke-token"): False,
    }


def oauth_invalid_request(message: str) -> JsonResponse:
    response = JsonResponse({"error": "invalid_request", "error_description": message}, status=400)
    response["Cache-Control"] = "no-store"
    return response


@cache
def _login_paths() -> frozenset[str]:
    return frozenset({reverse("login"), reverse("admin:login")})


def _body_too_large(request: HttpRequest) -> bool:
    try:
        request.body  # noqa: B018 (read for its check: Django raises past DATA_UPLOAD_MAX_MEMORY_SIZE)
    except RequestDataTooBig:
        return True
    return False


class OAuthParameterGuardMiddleware(MiddlewareMixin):
    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if request.method == "POST" and request.path in _login_paths() and _body_too_large(request):
            # The CSRF check reads the form before the sign-in view could answer: send the person
            # back to the form, which shows why (every other problem the view answers itself).
            messages.error(request, FORM_TOO_LARGE.format(limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE))
            return redirect(request.get_full_path())
        for_person = _guarded_paths().get(request.path)
        if for_person is None:
            return None
        problem = request_unsafe_parameter(request)
        if problem is None:
            return None
        if for_person:
            return render(request, ERROR_TEMPLATE, {"message": problem, "status": 400}, status=400)
        return oauth_invalid_request(problem)

"""The one way the public sources (OpenAlex, Crossref, arXiv) reach the network.

Every failure becomes a ``SourceError`` whose message names the source and the reason only: the
person sees it in the screening checkpoint, so it must never carry the URL (which holds the contact
email) or a body the source wrote. An answer is read in chunks and refused past ``RESPONSE_MAX_BYTES``
so a misbehaving server cannot fill the worker's memory. Tests replace ``http_client`` (one seam for
all three sources) with a client on an ``httpx.MockTransport``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from core.conf import gatehouse_settings
from core.text_safety import text_cleaned
from research.sources.base import SourceError

RESPONSE_MAX_BYTES = 10 * 1024 * 1024
TITLE_MAX_CHARS = 1000
ABSTRACT_MAX_CHARS = 20000
AUTHORS_MAX = 100
FIELD_MAX_CHARS = 500
USER_AGENT = "Gatehouse literature search"


def http_client(*, timeout: float) -> httpx.Client:
    """A client for one search; the tests' seam."""
    return httpx.Client(timeout=timeout, follow_redirects=True, limits=httpx.Limits(max_connections=4))


def user_agent() -> str:
    email = gatehouse_settings.RESEARCH_CONTACT_EMAIL
    return f"{USER_AGENT} (mailto:{email})" if email else USER_AGENT


def polite_params(**params: str | int) -> dict[str, str | int]:
    """``params`` with the operator's contact address, for OpenAlex's and Crossref's polite pools."""
    email = gatehouse_settings.RESEARCH_CONTACT_EMAIL
    return {**params, "mailto": email} if email else params


def response_body(*, source: str, url: str, params: Mapping[str, str | int]) -> bytes:
    """The body of a successful GET, or ``SourceError`` naming ``source`` and why not."""
    timeout = float(gatehouse_settings.RESEARCH_HTTP_TIMEOUT_SECONDS)
    headers = {"User-Agent": user_agent(), "Accept": "application/json, application/atom+xml;q=0.9"}
    try:
        with (
            http_client(timeout=timeout) as client,
            client.stream("GET", url, params=params, headers=headers) as response,
        ):
            if response.status_code == 429:
                raise SourceError(f"{source} is limiting requests (HTTP 429); try again later.")
            if response.status_code == 404:
                raise _NotFound()
            if response.status_code >= 400:
                raise SourceError(f"{source} answered with an error (HTTP {response.status_code}).")
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > RESPONSE_MAX_BYTES:
                raise SourceError(f"{source}'s answer is too large.")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > RESPONSE_MAX_BYTES:
                    raise SourceError(f"{source}'s answer is too large.")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.TimeoutException:
        raise SourceError(f"{source} did not answer in time.") from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        # The exception's text holds the URL; its class name says enough.
        raise SourceError(f"{source} could not be reached ({type(error).__name__}).") from None


class _NotFound(Exception):
    """A 404: a DOI lookup's "no such paper", an error for a search."""


def json_get(*, source: str, url: str, params: Mapping[str, str | int], missing_ok: bool = False) -> Any:
    """The JSON answer; None for a 404 when ``missing_ok``."""
    try:
        body = response_body(source=source, url=url, params=params)
    except _NotFound:
        if missing_ok:
            return None
        raise SourceError(f"{source} answered with an error (HTTP 404).") from None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise SourceError(f"{source} answered with invalid JSON.") from None


def text_get(*, source: str, url: str, params: Mapping[str, str | int]) -> bytes:
    try:
        return response_body(source=source, url=url, params=params)
    except _NotFound:
        raise SourceError(f"{source} answered with an error (HTTP 404).") from None


def shape_error(source: str) -> SourceError:
    return SourceError(f"{source} answered in an unexpected shape.")


def clean(value: object, *, max_chars: int = FIELD_MAX_CHARS) -> str:
    """A source's string, safe to store and show: no control characters, spacing collapsed,
    bounded. Anything not a string is ''."""
    if not isinstance(value, str):
        return ""
    return " ".join(text_cleaned(value).split())[:max_chars]


def year_of(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1000 <= value <= 3000:
        return None
    return value

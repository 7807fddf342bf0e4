"""The signing keys of a tenant's identity provider, from the JWKS its discovery document names.

Kept per process for ``KEYS_MAX_AGE_SECONDS``; a key id the copy lacks fetches it again (the
provider rotated its keys), at most once per ``REFETCH_MIN_SECONDS`` so that assertions naming
made-up key ids cannot make Gatehouse hammer the provider.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc.jwk import KeySet

from accounts.models import IdentityProvider

KEYS_MAX_AGE_SECONDS = 300
REFETCH_MIN_SECONDS = 30
HTTP_TIMEOUT_SECONDS = 5
MAX_DOCUMENT_BYTES = 256 * 1024


class KeysUnavailable(Exception):
    """The provider's keys could not be read (unreachable, not JSON, no keys)."""


@dataclass
class _Copy:
    keys: KeySet
    fetched: float
    issuer: str


_copies: dict[int, _Copy] = {}
_lock = threading.Lock()


def provider_keys(*, provider: IdentityProvider, kid: str | None) -> KeySet:
    """The provider's signing keys, fresh enough and holding ``kid`` if the provider has it."""
    now = time.monotonic()
    with _lock:
        copy = _copies.get(provider.pk)
    stale = copy is None or copy.issuer != provider.issuer or now - copy.fetched > KEYS_MAX_AGE_SECONDS
    unknown_kid = copy is not None and kid is not None and not _has(copy.keys, kid)
    if stale or (unknown_kid and copy is not None and now - copy.fetched > REFETCH_MIN_SECONDS):
        copy = _Copy(keys=_fetch(provider), fetched=now, issuer=provider.issuer)
        with _lock:
            _copies[provider.pk] = copy
    assert copy is not None
    return copy.keys


def provider_keys_forget() -> None:
    """Drop every copy (tests, and a provider whose configuration changed)."""
    with _lock:
        _copies.clear()


def _has(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)


def _fetch(provider: IdentityProvider) -> KeySet:
    discovery = f"{provider.issuer.rstrip('/')}/.well-known/openid-configuration"
    try:
        with httpx.Client(timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False) as http:
            metadata = _json(http.get(discovery))
            if str(metadata.get("issuer", "")).rstrip("/") != provider.issuer.rstrip("/"):
                raise KeysUnavailable("its discovery document names another issuer")
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                raise KeysUnavailable("its discovery document names no jwks_uri")
            document = _json(http.get(jwks_uri))
        return KeySet.import_key_set(document)  # type: ignore[arg-type]
    except KeysUnavailable:
        raise
    except (httpx.HTTPError, ValueError, TypeError, KeyError) as error:
        raise KeysUnavailable(type(error).__name__) from None


def _json(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        raise KeysUnavailable(f"HTTP {response.status_code}")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise KeysUnavailable("the document is too large")
    body = response.json()
    if not isinstance(body, dict):
        raise KeysUnavailable("the document is not a JSON object")
    return body

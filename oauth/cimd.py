"""How Gatehouse fetches client ID metadata documents: DOT's SSRF-hardened fetcher, with two
development switches and one rule of ours.

DOT (``oauth2_provider.cimd``) does the work: https only, the host resolved once and every address
checked, the connection made to the checked address, no redirects, one deadline for the whole
fetch, a size cap, JSON only, ``Cache-Control`` max-age honoured within
``CIMD_METADATA_MIN/MAX_AGE_SECONDS``, a failure backoff and an in-flight cap; the resolver then
requires the document's ``client_id`` to equal its URL and ``token_endpoint_auth_method`` ``none``.

Ours (``CIMD_METADATA_FETCHER``) adds:

- ``CIMD_ALLOW_LOOPBACK`` (core.conf): loopback addresses may serve a document. Only loopback,
  never private, link-local or cloud-metadata addresses, and settings refuse it unless Gatehouse
  itself is served on loopback (development on one machine).
- ``CIMD_CA_BUNDLE`` (core.conf): extra trust roots (a development CA) besides the system's, for
  these fetches only.
- The document is parsed with a nesting bound (``core.json_bounds``: a deeply nested document is
  refused, not a ``RecursionError``) and must meet the registration policy
  (``oauth.registration_policy``) like any registered client: redirect URIs https, loopback http
  or an allowed private-use scheme, without userinfo or fragment, bounded in number and length;
  only the authorization code and refresh token grants; bounded strings with no NUL. A document
  that breaks any rule is refused as a whole.
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import Any

import urllib3
from oauth2_provider.cimd import (
    CIMDError,
    SafeMetadataFetcher,
    _effective_max_age,
    _ip_is_public,
    _validate_client_id_url,
)
from oauth2_provider.settings import oauth2_settings

from core.conf import gatehouse_settings
from core.json_bounds import json_loads_bounded
from core.loopback import is_loopback_address
from oauth.registration_policy import ClientMetadataRefused, client_metadata_check

NON_PUBLIC_ADDRESS = "client_id host resolves to a non-public address ({ip})"
UNRESOLVED_HOST = "could not resolve client_id host"
NOT_JSON = "client_id document is not valid JSON"
NOT_OBJECT = "client_id document must be a JSON object"
REFUSED = "client metadata refused: {reason}"


def _address_allowed(ip: str) -> bool:
    if _ip_is_public(ip):
        return True
    if not gatehouse_settings.CIMD_ALLOW_LOOPBACK:
        return False
    return is_loopback_address(ip)


def metadata_host_resolve(*, hostname: str, port: int) -> list[str]:
    """Every address of the host, or CIMDError if any is one we must not connect to: a host that
    resolves to a public and a private address must not get to choose."""
    try:
        infos = socket.getaddrinfo(hostname, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise CIMDError(f"{UNRESOLVED_HOST}: {exc}") from exc
    addresses = [str(info[4][0]) for info in infos]
    for ip in addresses:
        if not _address_allowed(ip):
            raise CIMDError(NON_PUBLIC_ADDRESS.format(ip=ip))
    if not addresses:
        raise CIMDError(UNRESOLVED_HOST)
    return addresses


def _ssl_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    bundle = gatehouse_settings.CIMD_CA_BUNDLE
    if bundle:
        context.load_verify_locations(cafile=bundle)
    return context


class GatehouseMetadataFetcher(SafeMetadataFetcher):
    """DOT's ``SafeMetadataFetcher.fetch`` with our address policy and trust roots.

    The connection loop is DOT's, line for line: its address check and TLS context are inline in
    ``fetch`` and cannot be swapped on their own.
    """

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        parsed = _validate_client_id_url(client_id)
        port = parsed.port or 443
        addresses = metadata_host_resolve(hostname=parsed.hostname, port=port)

        timeout = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        headers = {"Host": parsed.netloc, "Accept": "application/json, application/*+json"}
        ssl_context = _ssl_context()
        # One deadline for every address together, so many addresses cannot multiply the wait.
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        for ip in addresses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # Connect to the checked address while SNI, certificate checks and Host use the name,
            # so a second DNS answer cannot move the connection elsewhere.
            pool = urllib3.HTTPSConnectionPool(
                host=ip,
                port=port,
                timeout=urllib3.Timeout(connect=remaining, read=remaining, total=remaining),
                retries=False,
                maxsize=1,
                ssl_context=ssl_context,
                server_hostname=parsed.hostname,
            )
            try:
                response = pool.urlopen("GET", path, headers=headers, redirect=False, preload_content=False)
                try:
                    metadata, max_age = self._read_document(response)
                finally:
                    response.release_conn()
            except urllib3.exceptions.HTTPError as exc:
                last_error = exc
                continue
            finally:
                pool.close()
            _policy_check(metadata)
            return metadata, max_age
        raise CIMDError(f"could not fetch client_id document: {last_error}")

    def _read_document(self, response: Any) -> tuple[dict[str, Any], int]:
        # DOT's, with a nesting bound: its plain json.loads lets a deep document raise
        # RecursionError, which no caller expects.
        if response.status != 200:
            raise CIMDError(f"client_id document returned HTTP {response.status}")
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media_type != "application/json" and not (
            media_type.startswith("application/") and media_type.endswith("+json")
        ):
            raise CIMDError(f"client_id document is not JSON (Content-Type: {media_type!r})")
        max_size = oauth2_settings.CIMD_MAX_DOCUMENT_SIZE
        body = response.read(max_size + 1)
        if len(body) > max_size:
            raise CIMDError("client_id document exceeds the maximum allowed size")
        try:
            data = json_loads_bounded(body.decode("utf-8"))
        except ValueError as exc:  # invalid UTF-8, invalid JSON, too deep
            raise CIMDError(NOT_JSON) from exc
        if not isinstance(data, dict):
            raise CIMDError(NOT_OBJECT)
        return data, _effective_max_age(response.headers.get("Cache-Control"))


def _policy_check(metadata: dict[str, Any]) -> None:
    try:
        client_metadata_check(metadata)
    except ClientMetadataRefused as refusal:
        raise CIMDError(REFUSED.format(reason=refusal.message)) from refusal

"""Where an upstream connection may go: public addresses, and the private networks an operator
allows with ``UPSTREAM_PRIVATE_NETWORKS`` (core.conf; empty by default).

A tenant's admin chooses an upstream's URL, and Gatehouse reports back what the server at that URL
answered: without a rule, that is a way to make Gatehouse reach, and read, addresses inside its own
network (a database's HTTP port, a cloud's metadata service at 169.254.169.254). So every HTTP
request made for an upstream (the MCP transports, the OAuth discovery and token requests, the
configuration test's own probe) goes through one transport, ``upstream_transport``, whose network
backend resolves the host itself, refuses the connection when any of its addresses is not allowed,
and then connects to an address it checked. The check is at connect time, on each connection and
each redirect hop, so a DNS answer that changes between the save's check and the connection (DNS
rebinding) cannot get past it; TLS still verifies, and the Host header still names, the URL's host
(httpcore takes both from the request's origin, not from the address connected to).

*Private* is anything that is not globally routable: loopback, RFC 1918, link-local (the metadata
address among them), shared address space (100.64.0.0/10), unique-local IPv6, multicast, reserved,
unspecified, documentation ranges; an IPv6 address that embeds an IPv4 one (IPv4-mapped, 6to4,
Teredo, NAT64's 64:ff9b::/96) is judged by the IPv4 address it reaches.

HTTP(S)_PROXY variables are not used for upstream connections: a proxy would resolve the host where
this check cannot see it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import anyio
import anyio.to_thread
import httpcore2
import httpx2
from django.core.exceptions import ImproperlyConfigured
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from core.conf import gatehouse_settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SETTING = "UPSTREAM_PRIVATE_NETWORKS"
HOW_TO_ALLOW = f"an operator allows private networks with {SETTING}"
LITERAL_REFUSED = "{address} is a private address; " + HOW_TO_ALLOW
RESOLVED_REFUSED = "{host} resolves to {address}, a private address; " + HOW_TO_ALLOW
NO_ADDRESS = "{host} has no address"
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
# As httpx2's own transport: the SDK's clients keep its default limits.
LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)


class EgressRefused(httpcore2.ConnectError):
    """A connection Gatehouse will not make: the host is, or resolves to, a private address this
    deployment does not allow. A ``ConnectError``, so every caller treats it as a connection that
    failed; its message says why, naming the host and the address, never the URL's path or query."""

    def __init__(self, *, host: str, address: IPAddress) -> None:
        self.host, self.address = host, address
        literal = _literal(host) is not None
        template = LITERAL_REFUSED if literal else RESOLVED_REFUSED
        super().__init__(template.format(host=host, address=_shown(address)))


def _shown(address: IPAddress) -> str:
    """An address as people write it: IPv4-mapped as ``::ffff:127.0.0.1``, not ``::ffff:7f00:1``."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


def upstream_private_networks() -> tuple[IPNetwork, ...]:
    """``UPSTREAM_PRIVATE_NETWORKS``, parsed strictly: ``10.0.0.1/8`` is refused rather than read
    as 10.0.0.0/8, so a typo can neither open nor close more than the operator wrote."""
    networks = []
    for value in gatehouse_settings.UPSTREAM_PRIVATE_NETWORKS:
        try:
            networks.append(ipaddress.ip_network(value, strict=True))
        except ValueError as error:
            raise ImproperlyConfigured(f"{SETTING}: {value!r} is not a network ({error}).") from error
    return tuple(networks)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address reaches through a translation (none for a plain one)."""
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.teredo is not None:
        return list(address.teredo)
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address in NAT64_PREFIX:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    return []


def address_is_public(address: IPAddress) -> bool:
    """Globally routable, judged (for IPv6 that embeds IPv4) by every IPv4 address it reaches. The
    flags beside ``is_global`` are for the ranges it lets through (IPv4 multicast) and for Python
    versions whose ``is_global`` differs."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded:
            return all(address_is_public(inner) for inner in embedded)
    return address.is_global and not (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv6Address) and address.is_site_local)
    )


def address_allowed(address: IPAddress, networks: Iterable[IPNetwork]) -> bool:
    """Public, or in a network the operator allows (an IPv4-mapped address counts as its IPv4)."""
    if address_is_public(address):
        return True
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        candidates.append(address.ipv4_mapped)
    return any(
        candidate.version == network.version and candidate in network
        for candidate in candidates
        for network in networks
    )


def _literal(host: str) -> IPAddress | None:
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def host_addresses(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver gives ``host``, in its order of preference (blocking;
    ``OSError`` when it has none). Tests replace this function to stand in for DNS."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: dict[IPAddress, None] = {}
    for info in infos:
        addresses[ipaddress.ip_address(str(info[4][0]))] = None
    return list(addresses)


def egress_refusal(
    host: str, addresses: Iterable[IPAddress], networks: Iterable[IPNetwork]
) -> EgressRefused | None:
    """The refusal for the first of ``addresses`` that is not allowed, or None: a host with one
    public and one private address must not get to choose which one is used."""
    networks = tuple(networks)
    for address in addresses:
        if not address_allowed(address, networks):
            return EgressRefused(host=host, address=address)
    return None


def egress_check(*, host: str, port: int) -> None:
    """Raise ``EgressRefused`` when ``host`` is, or resolves to, an address an upstream may not
    reach. Blocking; a host that does not resolve passes (the connection then fails on its own,
    saying so). For the save-time check; connections are checked again by the backend."""
    networks = upstream_private_networks()
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = host_addresses(host, port)
        except (OSError, UnicodeError):
            return
    refusal = egress_refusal(host, addresses, networks)
    if refusal is not None:
        raise refusal


def exception_egress_refusal(error: BaseException) -> EgressRefused | None:
    """The ``EgressRefused`` behind ``error``, if any: through exception groups (the SDK's
    transports raise anyio's) and the causes httpx2 chains its own errors to."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, EgressRefused):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)
    return None


class UpstreamNetworkBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's own backend, behind the address check: resolve, refuse, connect to a checked
    address (the next one if it refuses or does not answer), all within the request's connect
    timeout."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        # Read at each connection: an operator's change applies to the next one.
        networks = upstream_private_networks()
        deadline = None if timeout is None else anyio.current_time() + timeout
        literal = _literal(host)
        addresses = [literal] if literal is not None else await self._resolve(host, port, timeout)
        refusal = egress_refusal(host, addresses, networks)
        if refusal is not None:
            raise refusal
        failure: httpcore2.ConnectError | httpcore2.ConnectTimeout | None = None
        for index, address in enumerate(addresses):
            # Each address left gets an equal share of the time left (no happy eyeballs racing
            # them, as anyio does for a name): an address that never answers leaves time for the next.
            remaining = (
                None
                if deadline is None
                else max(deadline - anyio.current_time(), 0.0) / (len(addresses) - index)
            )
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=remaining,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def _resolve(self, host: str, port: int, seconds: float | None) -> list[IPAddress]:
        try:
            with anyio.fail_after(seconds):
                addresses = await anyio.to_thread.run_sync(host_addresses, host, port, abandon_on_cancel=True)
        except TimeoutError as error:
            raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from error
        except (OSError, UnicodeError) as error:
            # As httpcore's own backend reports a failed lookup (check.py tells gaierror apart).
            raise httpcore2.ConnectError(str(error)) from error
        if not addresses:
            raise httpcore2.ConnectError(NO_ADDRESS.format(host=host))
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("an upstream is reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class UpstreamTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a connection pool with ``UpstreamNetworkBackend``. httpx2's
    transport takes no backend, so this builds the pool it would (its defaults: verified TLS with
    the system's or ``SSL_CERT_FILE``'s roots, HTTP/1.1, its limits) and sets it where httpx2's
    methods read it; ``tests/upstreams/test_egress.py`` fails if httpx2 stops reading it there."""

    def __init__(self) -> None:
        # Not super().__init__(): it would build a second pool (and SSL context) only to drop it.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=LIMITS.max_connections,
            max_keepalive_connections=LIMITS.max_keepalive_connections,
            keepalive_expiry=LIMITS.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=UpstreamNetworkBackend(),
        )


def upstream_http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An HTTP client for upstream requests: the SDK's ``create_mcp_http_client`` (its timeouts,
    redirects off) on ``UpstreamTransport``. Its signature is the SDK's ``McpHttpClientFactory``,
    so ``sse_client`` takes it as ``httpx_client_factory``."""
    if timeout is None:
        timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=UpstreamTransport())


# Checked when the process loads the upstreams app's transports, so a bad value stops the server
# rather than failing its first upstream connection.
upstream_private_networks()

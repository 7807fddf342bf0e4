"""upstreams.egress: an upstream connection reaches public addresses, and private ones only in the
networks an operator allows (UPSTREAM_PRIVATE_NETWORKS), checked when each connection is made, on
every address its host resolves to, and again on each redirect hop; a refusal says which address,
and what an operator would change. DNS is stood in for by replacing the module's own resolver."""

from __future__ import annotations

import http.server
import ipaddress
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpcore2
import httpx2
import pytest
from django.core.exceptions import ImproperlyConfigured

from core.errors import InvalidInput
from tests.upstreams.support import unsaved, upstream_config
from upstreams import egress
from upstreams.check import upstream_test
from upstreams.egress import address_is_public, upstream_http_client
from upstreams.federation import ADDRESS_REFUSED, _reason
from upstreams.models import Transport
from upstreams.pool import session_open
from upstreams.services import upstream_save
from upstreams.validation import upstream_validate

HOW_TO_ALLOW = "an operator allows private networks with UPSTREAM_PRIVATE_NETWORKS"


@dataclass
class _Seen:
    requests: list[tuple[str, str]] = field(default_factory=list)


class _Handler(http.server.BaseHTTPRequestHandler):
    """200 "ok" to anything; ``/redirect?to=URL`` answers 302 to URL. Records (path, Host)."""

    seen: _Seen

    def do_GET(self) -> None:
        self.seen.requests.append((self.path, self.headers.get("Host", "")))
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/redirect?to="))
        else:
            self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class LocalServer:
    port: int
    seen: _Seen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def local_server() -> Iterator[LocalServer]:
    """A server on loopback that answers whoever reaches it (and remembers who did)."""
    seen = _Seen()
    handler = type("Handler", (_Handler,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield LocalServer(port=int(server.server_address[1]), seen=seen)
    server.shutdown()
    server.server_close()


@pytest.fixture
def allow(settings):
    """Set UPSTREAM_PRIVATE_NETWORKS (the tests' own settings allow loopback; the product's
    default is none)."""

    def _allow(*networks: str) -> None:
        settings.GATEHOUSE = {**settings.GATEHOUSE, "UPSTREAM_PRIVATE_NETWORKS": list(networks)}

    return _allow


@pytest.fixture
def dns(monkeypatch):
    """Stand in for DNS: ``dns({"name": ["10.0.0.5"]})``; any other name is not found."""

    def _dns(answers: dict[str, list[str]]) -> list[str]:
        asked: list[str] = []

        def resolve(host: str, port: int) -> list[egress.IPAddress]:
            asked.append(host)
            if host not in answers:
                raise OSError(f"no such host {host}")
            return [ipaddress.ip_address(address) for address in answers[host]]

        monkeypatch.setattr(egress, "host_addresses", resolve)
        return asked

    return _dns


@pytest.fixture
def no_connection(monkeypatch):
    """Fail the test if any TCP connection is attempted."""

    async def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(httpcore2.AnyIOBackend, "connect_tcp", refuse)


def _refused(message: str) -> pytest.RaisesExc[httpx2.ConnectError]:
    """A connection refused with ``message`` in its error."""
    return pytest.raises(httpx2.ConnectError, match=re.escape(message))


async def _get(url: str, **kwargs: object) -> httpx2.Response:
    async with upstream_http_client(timeout=httpx2.Timeout(5.0)) as client:
        return await client.get(url, **kwargs)  # type: ignore[arg-type]


async def test_a_loopback_server_is_reached_when_loopback_is_allowed(allow, local_server):
    allow("127.0.0.0/8")

    response = await _get(f"{local_server.url}/mcp")

    assert (response.status_code, response.text) == (200, "ok")


async def test_a_loopback_server_that_would_answer_is_refused_with_no_private_networks(allow, local_server):
    allow()

    with _refused(f"127.0.0.1 is a private address; {HOW_TO_ALLOW}"):
        await _get(f"{local_server.url}/mcp")
    assert local_server.seen.requests == []


async def test_the_cloud_metadata_address_is_refused_at_once_without_a_connection(allow, no_connection, dns):
    allow("127.0.0.0/8", "10.0.0.0/8")
    asked = dns({})
    started = time.monotonic()

    with _refused(f"169.254.169.254 is a private address; {HOW_TO_ALLOW}"):
        await _get("http://169.254.169.254/latest/meta-data/")
    assert time.monotonic() - started < 1.0
    assert asked == []


async def test_a_name_that_resolves_to_a_private_address_is_refused(allow, no_connection, dns):
    allow()
    dns({"upstream.example": ["10.0.0.5"]})

    with pytest.raises(httpx2.ConnectError) as refused:
        await _get("https://upstream.example/mcp")
    assert str(refused.value) == f"upstream.example resolves to 10.0.0.5, a private address; {HOW_TO_ALLOW}"


async def test_a_name_with_a_public_and_a_private_address_is_refused(allow, no_connection, dns):
    allow()
    dns({"mixed.example": ["93.184.216.34", "192.168.1.20"]})

    with _refused("mixed.example resolves to 192.168.1.20, a private address"):
        await _get("https://mixed.example/mcp")


async def test_a_name_in_an_allowed_network_is_reached_at_the_checked_address_under_its_own_name(
    allow, dns, local_server
):
    allow("127.0.0.1/32")
    dns({"upstream.example": ["127.0.0.1"]})

    response = await _get(f"http://upstream.example:{local_server.port}/mcp")

    assert response.text == "ok"
    assert local_server.seen.requests == [("/mcp", f"upstream.example:{local_server.port}")]


async def test_an_address_that_refuses_the_connection_is_followed_by_the_next_checked_one(
    allow, dns, local_server
):
    allow("127.0.0.0/8")
    # The server listens on 127.0.0.1 only: 127.0.0.2 refuses the connection.
    dns({"two.example": ["127.0.0.2", "127.0.0.1"]})

    response = await _get(f"http://two.example:{local_server.port}/mcp")

    assert response.text == "ok"


async def test_an_ipv4_mapped_loopback_address_is_refused(allow, no_connection):
    allow()

    with _refused(f"::ffff:127.0.0.1 is a private address; {HOW_TO_ALLOW}"):
        await _get("http://[::ffff:127.0.0.1]:8080/mcp")


async def test_a_name_resolving_to_an_ipv4_mapped_private_address_is_refused(allow, no_connection, dns):
    allow()
    dns({"sneaky.example": ["::ffff:169.254.169.254"]})

    with _refused("sneaky.example resolves to ::ffff:169.254.169.254, a private address"):
        await _get("http://sneaky.example/mcp")


async def test_a_redirect_from_an_allowed_server_to_a_private_address_is_refused(allow, dns, local_server):
    allow("127.0.0.1/32")
    dns({"internal.example": ["10.1.2.3"]})

    with _refused("internal.example resolves to 10.1.2.3, a private address"):
        await _get(f"{local_server.url}/redirect?to=http://internal.example/admin", follow_redirects=True)
    assert [path for path, _ in local_server.seen.requests] == ["/redirect?to=http://internal.example/admin"]


async def test_a_changed_answer_between_connections_is_checked_again(allow, dns, local_server):
    allow("127.0.0.1/32")
    answers = {"rebind.example": ["127.0.0.1"]}
    dns(answers)
    url = f"http://rebind.example:{local_server.port}/mcp"
    async with upstream_http_client(timeout=httpx2.Timeout(5.0)) as client:
        assert (await client.get(url, headers={"Connection": "close"})).text == "ok"
        answers["rebind.example"] = ["169.254.169.254"]

        with _refused("rebind.example resolves to 169.254.169.254"):
            await client.get(url)


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "127.0.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",  # noqa: S104 (an address judged, not bound)
        "224.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "ff02::1",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
    ],
)
def test_a_non_public_address_is_private(address):
    assert not address_is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_a_public_address_is_public(address):
    assert address_is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("value", ["10.0.0.1/8", "localhost", "10.0.0.0/33", ""])
def test_a_value_that_is_not_a_network_fails_loudly(allow, value):
    allow(value)

    with pytest.raises(ImproperlyConfigured, match=f"UPSTREAM_PRIVATE_NETWORKS: {value!r} is not a network"):
        egress.upstream_private_networks()


def test_the_product_default_allows_no_private_network():
    from config import settings as product_settings

    assert product_settings.GATEHOUSE["UPSTREAM_PRIVATE_NETWORKS"] == []


@pytest.mark.django_db
def test_the_configuration_test_says_which_address_was_refused_and_how_to_allow_it(
    allow, tenant, local_server
):
    allow()
    url = f"{local_server.url}/mcp"

    result = upstream_test(upstream=unsaved(tenant, url=url))

    assert result.error == f"could not connect to {url}: 127.0.0.1 is a private address; {HOW_TO_ALLOW}"
    assert local_server.seen.requests == []


@pytest.mark.django_db
@pytest.mark.parametrize(("transport", "path"), [(Transport.HTTP, "/mcp"), (Transport.SSE, "/sse")])
def test_a_name_resolving_to_a_private_address_fails_the_configuration_test(
    allow, dns, tenant, transport, path
):
    allow()
    answers = {"upstream.example": ["93.184.216.34"]}
    dns(answers)
    upstream = unsaved(tenant, transport=transport, url=f"http://upstream.example{path}")
    upstream_validate(
        upstream=upstream, allow_stdio=False, header_value=None, oauth_client_secret=None, env=None
    )
    # What the name resolves to changes after the save's check: the connection is refused anyway.
    answers["upstream.example"] = ["10.0.0.5"]

    result = upstream_test(upstream=upstream)

    assert result.error == (
        f"could not connect to http://upstream.example{path}: "
        f"upstream.example resolves to 10.0.0.5, a private address; {HOW_TO_ALLOW}"
    )


@pytest.mark.django_db
def test_saving_a_literal_private_address_is_refused_at_the_url(allow, tenant, no_connection):
    allow("127.0.0.0/8")

    with pytest.raises(InvalidInput) as refused:
        upstream_save(upstream=unsaved(tenant, url="http://169.254.169.254/mcp"), allow_stdio=False)

    assert refused.value.message == f"url: 169.254.169.254 is a private address; {HOW_TO_ALLOW}."
    assert refused.value.data == {"field": "url"}


@pytest.mark.django_db
def test_saving_a_name_that_resolves_to_a_private_address_is_refused_at_the_url(allow, tenant, dns):
    allow()
    dns({"intranet.example": ["10.20.30.40"]})

    with pytest.raises(InvalidInput) as refused:
        upstream_save(upstream=unsaved(tenant, url="https://intranet.example/mcp"), allow_stdio=False)

    assert refused.value.message == (
        f"url: intranet.example resolves to 10.20.30.40, a private address; {HOW_TO_ALLOW}."
    )


@pytest.mark.django_db
def test_saving_a_name_that_does_not_resolve_is_left_to_the_connection_test(allow, tenant, dns):
    allow()
    dns({})

    upstream = unsaved(tenant, url="https://unknown.example/mcp", enabled=False)

    upstream_save(upstream=upstream, allow_stdio=False)

    assert upstream.pk is not None


async def test_a_refused_session_is_told_to_mcp_callers_without_the_address(allow, no_connection):
    allow()
    config = upstream_config(url="http://169.254.169.254/mcp", connect_timeout=5)

    with pytest.raises(BaseException) as failed:  # noqa: PT011 (the SDK wraps it in exception groups)
        async with session_open(config):
            pass

    assert egress.exception_egress_refusal(failed.value) is not None
    assert _reason(failed.value) == ADDRESS_REFUSED


async def test_the_oauth_discovery_goes_through_the_same_check(allow, no_connection):
    from upstreams.oauth import upstream_oauth

    allow()
    config = upstream_config(url="http://169.254.169.254/mcp", auth="oauth", version="oauth-egress")

    with _refused("169.254.169.254 is a private address"):
        await upstream_oauth(config)

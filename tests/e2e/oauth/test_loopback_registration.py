"""Dynamic client registration and sign-in on a laptop: a loopback development setup (loopback
PUBLIC_URL) does not count registrations or authorization requests from this machine, so a
developer is never locked out after ten client runs; a public address is still limited, and so
is every address when PUBLIC_URL is public. The 429 names the limit and when it resets.

Each server here has a registration limit of its own (the harness lifts it for the rest of the
suite) and trusts one proxy, so a test can speak from a public address (``X-Forwarded-For``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from core.models import AuditAction, AuditEvent
from tests.e2e.conftest import _serve
from tests.e2e.harness import DaphneServer
from tests.e2e.oauth_driver import OAuthDriver, pkce_pair

pytestmark = pytest.mark.django_db

LIMIT = 2
METADATA = {
    "client_name": "Laptop client",
    "redirect_uris": ["http://127.0.0.1:9/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "token_endpoint_auth_method": "none",
}
DESCRIPTION = re.compile(rf"{LIMIT} registrations per hour per address\. Retry in (?P<seconds>\d+) s\.")


@pytest.fixture(scope="module")
def loopback_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(
        tmp_path_factory,
        database_url,
        "loopback-dcr",
        TRUSTED_PROXY_COUNT="1",
        RATE_LIMIT_REGISTER=f"{LIMIT}/hour",
        RATE_LIMIT_AUTHORIZE=f"{LIMIT}/minute",
    )


@pytest.fixture(scope="module")
def public_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(
        tmp_path_factory,
        database_url,
        "public-dcr",
        public_url="http://gatehouse.example.test",
        TRUSTED_PROXY_COUNT="1",
        RATE_LIMIT_REGISTER=f"{LIMIT}/hour",
    )


@pytest.fixture
async def loopback_http(loopback_server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=loopback_server.base_url, follow_redirects=False) as client:
        yield client


@pytest.fixture
async def public_http(public_server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=public_server.base_url, follow_redirects=False) as client:
        yield client


def _public_address() -> str:
    # 198.18.0.0/15 is for benchmarks, never a real client.
    return f"198.{18 + secrets.randbelow(2)}.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"


def _from(address: str | None) -> dict[str, str]:
    headers = {"X-Request-Id": "e2e-" + secrets.token_hex(8)}
    if address is not None:
        headers["X-Forwarded-For"] = address
    return headers


async def _register(http: httpx.AsyncClient, *, address: str | None) -> httpx.Response:
    return await http.post("/oauth/register/", json=METADATA, headers=_from(address))


def _assert_refusal_names_the_limit(refused: httpx.Response) -> None:
    assert refused.status_code == 429, refused.text
    body = refused.json()
    assert body["error"] == "rate_limited"
    said = DESCRIPTION.search(body["error_description"])
    assert said, body["error_description"]
    assert said["seconds"] == refused.headers["retry-after"]
    assert 1 <= int(said["seconds"]) <= 3600


async def test_a_loopback_development_setup_lets_this_machine_register_again_and_again(loopback_http):
    for _ in range(LIMIT + 3):
        response = await _register(loopback_http, address="127.0.0.1")
        assert response.status_code == 201, response.text
    # The IPv6 loopback and a direct connection (the peer, no proxy header) are this machine too.
    assert (await _register(loopback_http, address="::1")).status_code == 201
    assert (await _register(loopback_http, address=None)).status_code == 201


async def test_a_public_address_is_still_limited_on_a_loopback_setup_and_told_which_limit(loopback_http):
    address = _public_address()
    for _ in range(LIMIT):
        assert (await _register(loopback_http, address=address)).status_code == 201

    refused = await _register(loopback_http, address=address)

    _assert_refusal_names_the_limit(refused)
    assert await AuditEvent.objects.filter(action=AuditAction.RATE_LIMITED, ip=address).acount() == 1


async def test_a_public_setup_limits_this_machine_too(public_http):
    # A fresh loopback address per run (127.0.0.0/8): the counter is shared with nothing else.
    address = f"127.{secrets.randbelow(256)}.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"
    for _ in range(LIMIT):
        assert (await _register(public_http, address=address)).status_code == 201

    _assert_refusal_names_the_limit(await _register(public_http, address=address))


async def test_a_loopback_development_setup_lets_this_machine_sign_in_again_and_again(
    loopback_server, loopback_http
):
    """Shown failing before: the third authorization request from this machine in a minute was
    refused with a page, and the client waited for ever."""
    client_id = (await _register(loopback_http, address="127.0.0.1")).json()["client_id"]
    for _ in range(LIMIT + 4):
        _, challenge = pkce_pair()
        url = OAuthDriver(loopback_server).authorize_url(client_id=client_id, challenge=challenge)
        # Signed out: sent to the sign-in page, never refused.
        assert (await loopback_http.get(url, headers={"X-Forwarded-For": "127.0.0.1"})).status_code == 302

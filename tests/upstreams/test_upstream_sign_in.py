"""``upstreams.sign_in`` for members' sessions: the SDK's provider over the grant in the database.
A session of an upstream nobody connected fails at once, naming it and asking for an admin, without
a request to the upstream; one whose tokens the upstream no longer accepts fails the same way rather
than waiting for a person; stored tokens are used as they are, and are stored encrypted only."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx2
import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connections
from mcp.shared.auth import OAuthToken

from core.errors import UpstreamUnavailable
from tests.support.upstream_support import upstream_row
from tests.upstreams.sign_in_support import SignInServer, sign_in_server
from upstreams.config import config_from_row
from upstreams.models import AuthKind
from upstreams.sign_in.models import UpstreamGrant
from upstreams.sign_in.provider import RECONNECT, UpstreamSignInNeeded, upstream_sign_in
from upstreams.sign_in.storage import GrantStorage

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


@pytest.fixture(autouse=True)
def _executor_connection_closed() -> Iterator[None]:
    """The async ORM's thread keeps a connection, which would keep the test database from being
    dropped."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def vendor() -> Iterator[SignInServer]:
    with sign_in_server() as server:
        yield server


def _config(tenant, vendor: SignInServer):
    row = upstream_row(
        tenant=tenant.slug, name="crm", url=vendor.url, auth=AuthKind.OAUTH_CODE, enabled=False
    )
    return config_from_row(row)


async def _stored(config, token: str) -> None:
    storage = GrantStorage(config=config, redirect_uri="https://gatehouse.example/cb")
    await storage.set_tokens(OAuthToken(access_token=token, token_type="Bearer", expires_in=3600))


async def _initialize(config) -> httpx2.Response:
    provider = await upstream_sign_in(config)
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(config.url, json=INITIALIZE, headers=HEADERS, auth=provider)


async def test_a_session_of_an_upstream_nobody_connected_fails_at_once_naming_it(tenant, vendor):
    config = await _config_async(tenant, vendor)

    with pytest.raises(UpstreamSignInNeeded) as refused:
        await upstream_sign_in(config)

    assert isinstance(refused.value, UpstreamUnavailable)
    assert refused.value.message == f"The upstream MCP server 'crm' is unavailable: {RECONNECT}"
    assert vendor.registrations == 0


async def test_stored_tokens_are_used_as_they_are(tenant, vendor):
    config = await _config_async(tenant, vendor)
    token = secrets.token_urlsafe(8)
    vendor.tokens.add(token)
    await _stored(config, token)

    response = await _initialize(config)

    assert response.status_code == 200


async def test_tokens_are_stored_encrypted_only(tenant, vendor):
    config = await _config_async(tenant, vendor)
    token = "plain-" + secrets.token_urlsafe(8)

    await _stored(config, token)

    grant = await UpstreamGrant.objects.aget(upstream_id=config.id)
    assert token not in grant.tokens_encrypted


async def test_tokens_the_upstream_no_longer_accepts_fail_the_call_asking_for_an_admin(tenant, vendor):
    config = await _config_async(tenant, vendor)
    await _stored(config, "forgotten-by-the-upstream")

    with pytest.raises(UpstreamSignInNeeded):
        await _initialize(config)


async def _config_async(tenant, vendor: SignInServer):
    return await sync_to_async(_config)(tenant, vendor)

"""A worker that keeps what a token resolved to (``mcp_gateway.kernel.identity_cache``) still refuses the
very next request after a revocation, membership or role change, deactivation or ended session
committed anywhere, and trusts nothing it kept once its notification connection is lost.

The keeping worker is a Daphne process of its own, with a database application name of its own,
so a test can find its ``LISTEN`` connection; the changes are made on the main server or by SQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from asgiref.sync import sync_to_async

from accounts.models import Membership, Role, User
from core.db import psycopg_connect_kwargs
from mcp_gateway.kernel.identity_cache import CAUGHT_UP, CHANNEL
from oauth.bearer import TOKEN_NOT_MEMBER, TOKEN_UNKNOWN, TOKEN_USER_INACTIVE
from tests.e2e.conftest import SERVER_DB_APPLICATION, _serve
from tests.e2e.harness import DaphneServer, Person
from tests.e2e.oauth_driver import OAuthDriver
from tests.e2e.raw_mcp import RawMcp
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db

KEEPER_APPLICATION = "gatehouse-e2e-identity-keeper"


@pytest.fixture(scope="module")
def keeper(server, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """A second worker behind the main server's URL, keeping identities (the default)."""
    url = database_url.replace(SERVER_DB_APPLICATION, KEEPER_APPLICATION)
    yield from _serve(tmp_path_factory, url, "keeper", public_url=server.public_url)


def _keeper_listener() -> int | None:
    with psycopg.connect(**psycopg_connect_kwargs()) as admin:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND query IN (%s, %s) "
            "AND datname = current_database()",
            [KEEPER_APPLICATION, f"LISTEN {CHANNEL}", CAUGHT_UP],
        ).fetchone()
    return None if row is None else int(row[0])


async def _keeper_listening() -> int:
    # Waits for an event, never measures one: the bound is only against hanging.
    for _ in range(3000):
        pid = await sync_to_async(_keeper_listener)()
        if pid is not None:
            return pid
        await asyncio.sleep(0.01)
    raise AssertionError("the keeping worker never listened")


async def _keeper_not_listening_on(pid: int) -> None:
    for _ in range(3000):
        if await sync_to_async(_keeper_listener)() != pid:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the keeping worker's listener never went")


def _unannounced(sql: str, params: list) -> None:
    """Change a row with triggers off (as replication does): no worker hears of it."""
    with psycopg.connect(**psycopg_connect_kwargs()) as admin:
        admin.execute("SET session_replication_role = replica")
        admin.execute(sql, params)


async def _whoami(raw: RawMcp, url: str, session_id: str) -> dict:
    result = await raw.result(url, "tools/call", {"name": "whoami"}, session_id=session_id)
    return dict(result["structuredContent"])


async def _kept(raw: RawMcp, keeper: DaphneServer) -> str:
    """A session on the keeper, used again once its listener is up: then it keeps the token and
    session."""
    session_id = await raw.initialize(keeper.mcp_url)
    await _keeper_listening()
    for _ in range(3):
        await _whoami(raw, keeper.mcp_url, session_id)
    return session_id


@pytest.fixture
async def member(server, committed) -> AsyncIterator[tuple[Membership, RawMcp]]:
    membership = committed(MembershipFactory, role=Role.ADMIN)
    token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url])
    raw = RawMcp(token.token)
    yield membership, raw
    await raw.aclose()


async def test_a_worker_answers_a_repeated_token_from_what_it_kept(keeper, member):
    membership, raw = member
    session_id = await _kept(raw, keeper)

    await sync_to_async(_unannounced)(
        "UPDATE accounts_membership SET role = %s WHERE id = %s", [Role.VIEWER, membership.pk]
    )

    # No query, so the role it read before: what makes the other tests here worth their salt.
    assert (await _whoami(raw, keeper.mcp_url, session_id))["role"] == Role.ADMIN


async def test_revoking_a_token_on_one_worker_stops_the_next_request_on_another(server, keeper):
    driver = OAuthDriver(server)
    try:
        tokens = await driver.token_for(Person("alice"))
        raw = RawMcp(tokens["access_token"])
        session_id = await _kept(raw, keeper)

        revoked = await driver.http.post(
            "/oauth/revoke/", data={"token": tokens["access_token"], "client_id": tokens["client_id"]}
        )
        assert revoked.status_code == 200

        refused = await raw.request(keeper.mcp_url, "ping", session_id=session_id)
    finally:
        await driver.aclose()
    assert refused.status_code == 401
    assert refused.json()["error_description"] == TOKEN_UNKNOWN


async def test_removing_a_membership_stops_the_next_request(keeper, member):
    membership, raw = member
    session_id = await _kept(raw, keeper)

    await Membership.objects.filter(pk=membership.pk).adelete()

    refused = await raw.request(keeper.mcp_url, "ping", session_id=session_id)
    assert refused.status_code == 401
    assert refused.json()["error_description"] == TOKEN_NOT_MEMBER


async def test_a_role_change_applies_to_the_next_request(keeper, member):
    membership, raw = member
    session_id = await _kept(raw, keeper)

    await Membership.objects.filter(pk=membership.pk).aupdate(role=Role.VIEWER)

    assert (await _whoami(raw, keeper.mcp_url, session_id))["role"] == Role.VIEWER


async def test_deactivating_a_user_stops_the_next_request(keeper, member):
    membership, raw = member
    session_id = await _kept(raw, keeper)

    await User.objects.filter(pk=membership.user_id).aupdate(is_active=False)

    refused = await raw.request(keeper.mcp_url, "ping", session_id=session_id)
    assert refused.status_code == 401
    assert refused.json()["error_description"] == TOKEN_USER_INACTIVE


async def test_a_session_deleted_on_one_worker_is_gone_on_the_next_request_to_another(server, keeper, member):
    _, raw = member
    session_id = await _kept(raw, keeper)

    ended = await raw.http.delete(server.mcp_url, headers=raw.headers(session_id))
    assert ended.status_code == 204

    gone = await raw.request(keeper.mcp_url, "ping", session_id=session_id)
    assert gone.status_code == 404


async def test_a_worker_that_lost_its_listener_serves_nothing_it_kept(keeper, member):
    membership, raw = member
    session_id = await _kept(raw, keeper)
    listener = await _keeper_listening()

    def cut() -> None:
        with psycopg.connect(**psycopg_connect_kwargs()) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [listener])

    await sync_to_async(cut)()
    await _keeper_not_listening_on(listener)
    # Missed by the keeper whatever happens: made with triggers off.
    await sync_to_async(_unannounced)("DELETE FROM accounts_membership WHERE id = %s", [membership.pk])

    refused = await raw.request(keeper.mcp_url, "ping", session_id=session_id)
    assert refused.status_code == 401
    assert refused.json()["error_description"] == TOKEN_NOT_MEMBER

"""``mcp_gateway.kernel.identity_cache``: kept answers are bounded (time, the token's expiry, size), served
only while the worker's ``LISTEN`` connection is up, forgotten by what they depend on, never kept
from a query that raced a change; and the triggers that announce every such change (PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone

from accounts.models import Membership, Role, Tenant, User
from core import db, querycount
from core.db import psycopg_connect_kwargs
from core.errors import AuthenticationFailed
from mcp_gateway.kernel.identity_cache import CHANNEL, IdentityCache, identity_cache
from mcp_gateway.models import McpSession
from mcp_gateway.transport.bearer import identity_from_bearer
from oauth.bearer import TOKEN_NOT_MEMBER, TOKEN_UNKNOWN
from oauth.models import AccessToken
from tests.support.factories import AccessTokenFactory, ApplicationFactory, MembershipFactory
from tests.support.identity_cache_support import identity_cache_stop

LATER = timezone.now() + timedelta(days=1)
TAGS = frozenset({("token", 1), ("user", 2)})


async def _until(condition, what: str) -> None:
    # Waits for an event, never measures one: the bound is only against hanging.
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def _listening(cache: IdentityCache) -> IdentityCache:
    cache.start()
    await _until(cache._trusted, "the listener connected")
    return cache


@pytest.fixture
async def cache(transactional_db) -> AsyncIterator[IdentityCache]:
    cache = IdentityCache(max_entries=3)
    yield await _listening(cache)
    await identity_cache_stop(cache)


@pytest.fixture
async def shared_cache(transactional_db, settings) -> AsyncIterator[IdentityCache]:
    """The process's own cache, listening, with the hot-path pool counting its queries."""
    settings.GATEHOUSE = {**settings.GATEHOUSE, "GATEHOUSE_COUNT_QUERIES": True}
    await _close_hot_path_pool()
    yield await _listening(identity_cache)
    await identity_cache_stop(identity_cache)
    await _close_hot_path_pool()
    await sync_to_async(connections.close_all)()


async def _close_hot_path_pool() -> None:
    # It belongs to one test's event loop, and the test database must be droppable afterwards.
    pool, db._pool._pool = db._pool._pool, None
    if pool is not None:
        await pool.close()


async def test_nothing_is_kept_or_served_before_the_listener_is_up(transactional_db):
    cache = IdentityCache()
    cache.put("k", "v", generation=cache.generation, expires=LATER, tags=TAGS)
    assert await cache.get("k") is None
    assert len(cache) == 0


async def test_a_kept_answer_is_served(cache):
    cache.put("k", "v", generation=cache.generation, expires=LATER, tags=TAGS)
    assert await cache.get("k") == "v"


async def test_an_answer_is_never_kept_past_its_token_s_expiry(cache):
    cache.put(
        "soon", "v", generation=cache.generation, expires=timezone.now() + timedelta(seconds=5), tags=TAGS
    )
    cache.put(
        "gone", "v", generation=cache.generation, expires=timezone.now() - timedelta(seconds=1), tags=TAGS
    )
    assert cache._entries["soon"].deadline <= time.monotonic() + 5
    assert await cache.get("gone") is None


async def test_a_kept_answer_past_its_time_is_dropped(cache):
    cache.put("k", "v", generation=cache.generation, expires=LATER, tags=TAGS)
    cache._entries["k"] = cache._entries["k"].__class__(value="v", deadline=time.monotonic() - 1, tags=TAGS)
    assert await cache.get("k") is None
    assert len(cache) == 0
    assert cache._tagged == {}


async def test_requests_arriving_together_share_round_trips(cache):
    cache.put("k", "v", generation=cache.generation, expires=LATER, tags=TAGS)
    assert await asyncio.gather(*(cache.get("k") for _ in range(100))) == ["v"] * 100


async def test_the_least_recently_used_answer_goes_first(cache):
    for key in "abc":
        cache.put(key, key, generation=cache.generation, expires=LATER, tags=frozenset({("user", key)}))
    assert await cache.get("a") == "a"
    cache.put("d", "d", generation=cache.generation, expires=LATER, tags=frozenset({("user", "d")}))
    assert [await cache.get(key) for key in "abcd"] == ["a", None, "c", "d"]
    assert ("user", "b") not in cache._tagged


async def test_a_change_forgets_only_the_answers_that_depend_on_it(cache):
    cache.put(
        "alice", 1, generation=cache.generation, expires=LATER, tags=frozenset({("user", 1), ("tenant", 9)})
    )
    cache.put(
        "bob", 2, generation=cache.generation, expires=LATER, tags=frozenset({("user", 2), ("tenant", 9)})
    )
    cache.received(json.dumps({"kind": "user", "id": 1}))
    assert (await cache.get("alice"), await cache.get("bob")) == (None, 2)
    cache.received(json.dumps({"kind": "tenant", "id": 9}))
    assert await cache.get("bob") is None
    assert cache._tagged == {}


async def test_an_answer_read_while_a_change_was_heard_is_not_kept(cache):
    generation = cache.generation
    cache.received(json.dumps({"kind": "token", "id": 12345}))
    cache.put("k", "v", generation=generation, expires=LATER, tags=TAGS)
    assert await cache.get("k") is None


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "not json",
        "[]",
        "null",
        '{"kind": "user"}',
        '{"id": 1}',
        '{"kind": "nobody", "id": 1}',
        '{"kind": "user", "id": true}',
        '{"kind": "user", "id": 1.5}',
        '{"kind": "user", "id": [1]}',
        '{"kind": ["user"], "id": 1}',
        "[" * 100_000,
    ],
)
async def test_an_unreadable_notification_forgets_everything(cache, payload):
    cache.put("k", "v", generation=cache.generation, expires=LATER, tags=TAGS)
    cache.received(payload)
    assert await cache.get("k") is None


async def test_a_change_to_something_unknown_forgets_nothing_else(cache):
    cache.put("k", "v", generation=cache.generation, expires=LATER, tags=TAGS)
    cache.received(json.dumps({"kind": "session", "id": "x" * 100_000}))
    cache.received(json.dumps({"kind": "user", "id": -1}))
    assert await cache.get("k") == "v"


async def test_a_lost_listener_serves_nothing_and_starts_empty_when_back(cache):
    cache.put("k", "v", generation=cache.generation, expires=LATER, tags=TAGS)
    listener = cache._pgconn.backend_pid
    with psycopg.connect(**psycopg_connect_kwargs()) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [listener])
    await _until(lambda: cache._pgconn is None or cache._pgconn.backend_pid != listener, "the loss was seen")
    assert await cache.get("k") is None
    await _until(cache._trusted, "the listener reconnected")
    assert await cache.get("k") is None
    assert len(cache) == 0


async def test_a_repeated_token_costs_no_query_until_it_is_revoked(shared_cache):
    token = await sync_to_async(AccessTokenFactory.create)()
    first, _ = await identity_from_bearer(raw_token=token.token, session_id=None)
    before = querycount._count
    again, _ = await identity_from_bearer(raw_token=token.token, session_id=None)
    assert querycount._count == before
    assert again == first

    # No waiting: the change committed before the request, so the request hears it first.
    await AccessToken.objects.filter(pk=token.pk).adelete()
    with pytest.raises(AuthenticationFailed) as refused:
        await identity_from_bearer(raw_token=token.token, session_id=None)
    assert refused.value.message == TOKEN_UNKNOWN


async def test_a_removed_membership_stops_the_next_request(shared_cache):
    token = await sync_to_async(AccessTokenFactory.create)()
    await identity_from_bearer(raw_token=token.token, session_id=None)
    assert len(shared_cache) == 1
    await Membership.objects.filter(user_id=token.user_id).adelete()
    with pytest.raises(AuthenticationFailed) as refused:
        await identity_from_bearer(raw_token=token.token, session_id=None)
    assert refused.value.message == TOKEN_NOT_MEMBER


async def test_a_session_that_needs_its_touch_is_read_afresh(shared_cache):
    token = await sync_to_async(AccessTokenFactory.create)()
    session = await McpSession.objects.acreate(
        id="s-touch",
        user_id=token.user_id,
        tenant_id=token.tenant_id,
        application_id=token.application_id,
        scopes="mcp:read",
        protocol_version="2025-11-25",
        last_seen=timezone.now() - timedelta(minutes=5),
    )
    await identity_from_bearer(raw_token=token.token, session_id=session.id)
    before = querycount._count
    _, kept = await identity_from_bearer(raw_token=token.token, session_id=session.id)
    # Kept, but its last_seen calls for a touch: that decision is taken on the row as it is now.
    assert querycount._count == before + 1
    assert kept is not None
    assert kept.id == session.id


async def test_an_unknown_session_id_is_not_kept(shared_cache):
    token = await sync_to_async(AccessTokenFactory.create)()
    _, session = await identity_from_bearer(raw_token=token.token, session_id="no-such-session")
    assert session is None
    assert len(shared_cache) == 0


def _heard(listener: psycopg.Connection) -> list[dict]:
    heard: list[dict] = []
    for notify in listener.notifies(timeout=30):
        if notify.payload == "end":
            return heard
        heard.append(json.loads(notify.payload))
    raise AssertionError(f"no end marker; heard {heard}")


@pytest.mark.django_db(transaction=True)
def test_the_database_announces_every_change_a_kept_answer_depends_on():
    membership = MembershipFactory.create(role=Role.ADMIN)
    user, tenant = membership.user, membership.tenant
    application = ApplicationFactory.create()
    token = AccessTokenFactory.create(membership=membership, application=application)
    expired = AccessTokenFactory.create(membership=membership, expires=timezone.now() - timedelta(minutes=1))
    session = McpSession.objects.create(
        id="s-1", user=user, tenant=tenant, application=application, scopes="mcp:read",
        protocol_version="2025-11-25", last_seen=timezone.now(),
    )  # fmt: skip
    with psycopg.connect(**psycopg_connect_kwargs()) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        # Not announced: nothing kept depends on them.
        User.objects.filter(pk=user.pk).update(last_login=timezone.now(), display_name="x")
        McpSession.objects.filter(pk=session.pk).update(last_seen=timezone.now())
        AccessToken.objects.filter(pk=expired.pk).delete()
        # Announced, each naming what changed.
        AccessToken.objects.filter(pk=token.pk).update(scope="mcp:read")
        Membership.objects.filter(pk=membership.pk).update(role=Role.VIEWER)
        User.objects.filter(pk=user.pk).update(is_active=False)
        Tenant.objects.filter(pk=tenant.pk).update(is_active=False)
        McpSession.objects.filter(pk=session.pk).update(last_seen=timezone.now() - timedelta(hours=2))
        McpSession.objects.filter(pk=session.pk).update(log_level="debug")
        McpSession.objects.filter(pk=session.pk).update(terminated_at=timezone.now())
        McpSession.objects.filter(pk=session.pk).delete()  # ended already: not announced
        Membership.objects.filter(pk=membership.pk).delete()
        type(application).objects.filter(pk=application.pk).update(name="renamed")
        type(application).objects.filter(pk=application.pk).delete()  # and its token with it
        listener.execute("SELECT pg_notify(%s, 'end')", [CHANNEL])
        heard = _heard(listener)
    assert heard[:9] == [
        {"kind": "token", "id": token.pk},
        {"kind": "user", "id": user.pk},
        {"kind": "user", "id": user.pk},
        {"kind": "tenant", "id": tenant.pk},
        {"kind": "session", "id": "s-1"},
        {"kind": "session", "id": "s-1"},
        {"kind": "session", "id": "s-1"},
        {"kind": "user", "id": user.pk},
        {"kind": "application", "id": application.pk},
    ]
    # One deletion, in whichever order Django's collector takes the client and its token.
    assert sorted(heard[9:], key=lambda change: change["kind"]) == [
        {"kind": "application", "id": application.pk},
        {"kind": "token", "id": token.pk},
    ]

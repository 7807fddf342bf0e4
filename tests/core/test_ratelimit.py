"""Rate limits: which limit applies, what is counted together, and what a refused caller is told."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from limits.errors import ConfigurationError

from accounts.models import Membership
from core.errors import RateLimited
from core.identity import Identity
from core.models import RateLimitRule, RateLimitScope
from core.ratelimit.limits import AppliedLimit, rate_limit_call, rate_limit_for, rate_limit_http
from tests.support.factories import MembershipFactory
from tests.support.ratelimit_support import TEST_REDIS_URL

REDIS_URL = TEST_REDIS_URL
# No storage has this scheme: building one raises, so a test can see that none was needed.
NO_STORAGE_URL = "nowhere://"
NO_LIMITS = dict.fromkeys(["tool", "tool_expensive", "resource", "authorize", "login", "register"])

TOOL = RateLimitScope.TOOL
RESOURCE = RateLimitScope.RESOURCE


@pytest.fixture
def limits_config(request, settings):
    """Set the storage and default limits (none unless a test names some); rules are read each time."""
    default_storage = getattr(request, "param", "memory://")

    def configure(*, storage_url: str | None = None, cache_seconds: int = 0, **defaults: str | None) -> None:
        settings.GATEHOUSE = {
            **settings.GATEHOUSE,
            "RATE_LIMIT_STORAGE_URL": storage_url or default_storage,
            "RATE_LIMIT_RULE_CACHE_SECONDS": cache_seconds,
            "RATE_LIMITS": {**NO_LIMITS, **defaults},
        }

    configure()
    return configure


# Counting is checked against both stores: Redis, shared by every worker, and a process's memory.
on_both_stores = pytest.mark.parametrize(
    "limits_config", [REDIS_URL, "memory://"], indirect=True, ids=["redis", "memory"]
)


@pytest.fixture
async def _close_async_orm_connections():
    """Rules are read on asgiref's worker thread, outside pytest-django's care."""
    yield
    await sync_to_async(connections.close_all)()


def identity_of(membership: Membership) -> Identity:
    return Identity(
        user_id=membership.user_id,
        username=membership.user.username,
        tenant_id=membership.tenant_id,
        tenant_slug=membership.tenant.slug,
        tenant_name=membership.tenant.name,
        role=membership.role,
        scopes=frozenset({"mcp:read", "mcp:write"}),
        application_id=0,
        client_id="client",
        client_name="Client",
        token_id=0,
    )


@pytest.fixture
def alice(owner) -> Identity:
    return identity_of(owner)


@pytest.fixture
def bob(member) -> Identity:
    return identity_of(member)


@pytest.fixture
def carol(outsider) -> Identity:
    return identity_of(outsider)


@pytest.fixture
def alice_elsewhere(owner, outsider) -> Identity:
    """Alice again, signed in to the other tenant."""
    return identity_of(MembershipFactory.create(user=owner.user, tenant=outsider.tenant, role="viewer"))


async def calls_allowed(
    identity: Identity,
    *,
    tries: int,
    scope: RateLimitScope = TOOL,
    target: str = "whoami",
    expensive: bool = False,
) -> int:
    allowed = 0
    for _ in range(tries):
        try:
            await rate_limit_call(identity=identity, scope=scope, target=target, expensive=expensive)
        except RateLimited:
            continue
        allowed += 1
    return allowed


async def refusal_of(
    identity: Identity, *, scope: RateLimitScope = TOOL, target: str = "whoami"
) -> RateLimited:
    with pytest.raises(RateLimited) as refused:
        await rate_limit_call(identity=identity, scope=scope, target=target)
    return refused.value


def applied_limit(**kwargs: Any) -> AppliedLimit:
    found = rate_limit_for(**kwargs)
    assert found is not None, f"no limit applies to {kwargs}"
    return found


def add_rule(
    *,
    scope: RateLimitScope,
    limit: int,
    target: str = "",
    tenant_id: int | None = None,
    period_seconds: int = 60,
) -> RateLimitRule:
    return RateLimitRule.objects.create(
        scope=scope, target=target, tenant_id=tenant_id, limit=limit, period_seconds=period_seconds
    )


# Which limit applies.


def test_defaults_apply_per_scope_and_an_expensive_tool_gets_the_stricter_one(limits_config, tenant):
    limits_config(tool="120/minute", tool_expensive="5/minute", resource="30/minute", login="5/minute")

    def text(**kwargs) -> str | None:
        applied = rate_limit_for(tenant_id=tenant.id, **kwargs)
        return applied.text if applied else None

    assert text(scope=TOOL, target="whoami") == "120 per 1 minute"
    assert text(scope=TOOL, target="search", expensive=True) == "5 per 1 minute"
    assert text(scope=RESOURCE, target="test://static-text") == "30 per 1 minute"
    assert text(scope=RateLimitScope.LOGIN, target="127.0.0.1") == "5 per 1 minute"
    assert text(scope=RateLimitScope.REGISTER, target="127.0.0.1") is None


def test_the_most_specific_rule_wins_at_every_level(limits_config, tenant, outsider):
    limits_config(tool="100/minute")

    def limit_for(tenant_id: int) -> int | None:
        applied = rate_limit_for(scope=TOOL, tenant_id=tenant_id, target="whoami")
        return applied.item.amount if applied else None

    assert limit_for(tenant.id) == 100
    add_rule(scope=TOOL, limit=50)
    assert limit_for(tenant.id) == 50
    add_rule(scope=TOOL, target="whoami", limit=40)
    assert limit_for(tenant.id) == 40
    add_rule(scope=TOOL, tenant_id=tenant.id, limit=30)
    assert limit_for(tenant.id) == 30
    add_rule(scope=TOOL, tenant_id=tenant.id, target="whoami", limit=20)
    assert limit_for(tenant.id) == 20
    # Another tenant's rules stay with it; a rule for another tool is not this tool's.
    assert limit_for(outsider.tenant_id) == 40
    add_rule(scope=TOOL, tenant_id=outsider.tenant_id, target="search", limit=1)
    assert limit_for(outsider.tenant_id) == 40


def test_a_named_rule_lifts_an_expensive_tool_and_a_blank_one_overrides_its_default(limits_config, tenant):
    limits_config(tool="100/minute", tool_expensive="5/minute")
    add_rule(scope=TOOL, target="search", limit=8)
    assert applied_limit(scope=TOOL, tenant_id=tenant.id, target="search", expensive=True).item.amount == 8
    add_rule(scope=TOOL, tenant_id=tenant.id, limit=200)
    assert applied_limit(scope=TOOL, tenant_id=tenant.id, target="search", expensive=True).item.amount == 200


def test_the_longest_resource_prefix_wins_and_the_tenant_s_own_rules_come_first(
    limits_config, tenant, outsider
):
    limits_config(resource="30/minute")
    add_rule(scope=RESOURCE, target="test://", limit=10)
    add_rule(scope=RESOURCE, target="test://static", limit=5)
    add_rule(scope=RESOURCE, target="test://", tenant_id=tenant.id, limit=7)

    def applied(tenant_id: int, uri: str) -> tuple[int, str]:
        found = applied_limit(scope=RESOURCE, tenant_id=tenant_id, target=uri)
        return found.item.amount, found.counted_as

    assert applied(outsider.tenant_id, "test://static-text") == (5, "test://static")
    assert applied(outsider.tenant_id, "test://watched-resource") == (10, "test://")
    assert applied(outsider.tenant_id, "file:///etc/motd") == (30, "*")
    assert applied(tenant.id, "test://static-text") == (7, "test://")


def test_the_per_ip_scopes_read_only_rules_for_everyone_and_everything(limits_config, tenant):
    limits_config(login="5/minute")
    add_rule(scope=RateLimitScope.LOGIN, tenant_id=tenant.id, limit=1)
    add_rule(scope=RateLimitScope.LOGIN, target="127.0.0.1", limit=2)
    assert applied_limit(scope=RateLimitScope.LOGIN, tenant_id=None, target="127.0.0.1").item.amount == 5
    add_rule(scope=RateLimitScope.LOGIN, limit=3, period_seconds=3600)
    assert (
        applied_limit(scope=RateLimitScope.LOGIN, tenant_id=None, target="127.0.0.1").text == "3 per 1 hour"
    )


def test_rules_are_cached_for_the_configured_time(limits_config, tenant):
    limits_config(tool="100/minute", cache_seconds=60)
    assert applied_limit(scope=TOOL, tenant_id=tenant.id, target="whoami").item.amount == 100
    add_rule(scope=TOOL, limit=1)
    assert applied_limit(scope=TOOL, tenant_id=tenant.id, target="whoami").item.amount == 100


# Counting over MCP.


def async_db(test):
    """Rules are read on asgiref's worker thread, so they must be committed to be seen there."""
    return pytest.mark.django_db(transaction=True)(
        pytest.mark.usefixtures("_close_async_orm_connections")(test)
    )


@on_both_stores
@async_db
async def test_a_user_gets_the_default_number_of_calls_per_tool(limits_config, alice):
    limits_config(tool="3/minute")
    assert await calls_allowed(alice, tries=5) == 3
    assert await calls_allowed(alice, tries=1, target="set_display_name") == 1


@on_both_stores
@async_db
async def test_a_burst_of_concurrent_calls_is_counted_exactly(limits_config, alice):
    # More calls at once than the process keeps Redis connections: they queue, none slips through.
    limits_config(tool="100/minute")
    outcomes = await asyncio.gather(
        *(rate_limit_call(identity=alice, scope=TOOL, target="whoami") for _ in range(300)),
        return_exceptions=True,
    )
    assert sum(outcome is None for outcome in outcomes) == 100
    assert all(isinstance(outcome, RateLimited) for outcome in outcomes if outcome is not None)


@on_both_stores
@async_db
async def test_an_expensive_tool_is_held_to_its_own_stricter_default(limits_config, alice):
    limits_config(tool="100/minute", tool_expensive="2/minute")
    assert await calls_allowed(alice, tries=4, target="search", expensive=True) == 2
    assert await calls_allowed(alice, tries=4, target="whoami") == 4


@on_both_stores
@async_db
async def test_users_and_tenants_do_not_share_counters(limits_config, alice, bob, carol, alice_elsewhere):
    limits_config(tool="2/minute", resource="2/minute")
    for scope, target in ((TOOL, "whoami"), (RESOURCE, "test://static-text")):
        assert await calls_allowed(alice, tries=3, scope=scope, target=target) == 2
        assert await calls_allowed(bob, tries=3, scope=scope, target=target) == 2
        assert await calls_allowed(carol, tries=3, scope=scope, target=target) == 2
        assert await calls_allowed(alice_elsewhere, tries=3, scope=scope, target=target) == 2


@on_both_stores
@async_db
async def test_resource_reads_share_one_counter_unless_a_prefix_rule_counts_its_own(limits_config, alice):
    limits_config(resource="3/minute")
    await sync_to_async(add_rule)(scope=RESOURCE, target="test://static", limit=1)
    assert await calls_allowed(alice, tries=2, scope=RESOURCE, target="test://static-text") == 1
    assert await calls_allowed(alice, tries=1, scope=RESOURCE, target="test://static-binary") == 0
    assert await calls_allowed(alice, tries=2, scope=RESOURCE, target="test://watched-resource") == 2
    assert await calls_allowed(alice, tries=2, scope=RESOURCE, target="test://template/1/data") == 1


@on_both_stores
@async_db
async def test_a_tenant_rule_limits_that_tenant_only(limits_config, alice, carol):
    limits_config(tool="100/minute")
    await sync_to_async(add_rule)(scope=TOOL, target="whoami", tenant_id=alice.tenant_id, limit=1)
    assert await calls_allowed(alice, tries=3) == 1
    assert await calls_allowed(carol, tries=3) == 3


@async_db
async def test_a_limit_of_zero_refuses_every_call_and_says_to_retry_after_the_period(limits_config, alice):
    limits_config(storage_url=NO_STORAGE_URL)
    await sync_to_async(add_rule)(scope=TOOL, target="whoami", limit=0, period_seconds=120)
    refusal = await refusal_of(alice)
    assert refusal.retry_after_seconds == 120
    assert refusal.message == "Too many requests. Limit: 0 per 2 minute. Retry in 120 s."


@on_both_stores
@async_db
async def test_a_refusal_names_the_limit_and_when_a_slot_frees(limits_config, alice):
    limits_config(tool="2/minute")
    started = time.monotonic()
    assert await calls_allowed(alice, tries=2) == 2
    refusal = await refusal_of(alice)
    elapsed = time.monotonic() - started
    # A slot frees a minute after the first call, which was at most `elapsed` ago.
    assert 60 - elapsed <= refusal.retry_after_seconds <= 60
    assert (
        refusal.message
        == f"Too many requests. Limit: 2 per 1 minute. Retry in {refusal.retry_after_seconds} s."
    )
    assert refusal.data == {"limit": "2 per 1 minute", "retryAfterSeconds": refusal.retry_after_seconds}
    assert refusal.jsonrpc_code == -32029
    assert refusal.http_status == 429


@on_both_stores
@async_db
async def test_a_caller_who_waits_as_told_is_let_in(limits_config, alice):
    # The window is waited out: as short as leaves the work below (two counts) most of 1.8 s on a
    # loaded machine. The pause passes a whole second, so the hint (whole seconds) is less than
    # the period.
    period, pause = 3, 1.2
    await sync_to_async(add_rule)(scope=TOOL, target="whoami", limit=1, period_seconds=period)
    before_call = time.monotonic()
    await rate_limit_call(identity=alice, scope=TOOL, target="whoami")
    after_call = time.monotonic()
    await asyncio.sleep(pause)
    before_refusal = time.monotonic()
    refusal = await refusal_of(alice)
    after_refusal = time.monotonic()
    # The slot frees when the counted call leaves the window, which the hint counts down to: it is
    # neither a whole period (the pause has passed) nor less than what is left of the window.
    longest, shortest = after_refusal - before_call, before_refusal - after_call
    assert period - longest <= refusal.retry_after_seconds <= math.ceil(period - shortest) < period
    await asyncio.sleep(refusal.retry_after_seconds)
    await rate_limit_call(identity=alice, scope=TOOL, target="whoami")


@async_db
async def test_no_limit_means_no_storage_at_all(limits_config, alice):
    limits_config(storage_url=NO_STORAGE_URL)
    assert await calls_allowed(alice, tries=3) == 3
    limits_config(storage_url=NO_STORAGE_URL, tool="1/minute")
    with pytest.raises(ConfigurationError):
        await rate_limit_call(identity=alice, scope=TOOL, target="whoami")


# Counting over HTTP.


@on_both_stores
@pytest.mark.django_db
def test_http_requests_are_counted_per_scope_and_key(limits_config):
    limits_config(authorize="2/minute", login="1/minute")
    for _ in range(2):
        rate_limit_http(scope=RateLimitScope.AUTHORIZE, key="10.0.0.1")
    with pytest.raises(RateLimited) as refused:
        rate_limit_http(scope=RateLimitScope.AUTHORIZE, key="10.0.0.1")
    assert refused.value.data == {
        "limit": "2 per 1 minute",
        "retryAfterSeconds": refused.value.retry_after_seconds,
    }
    assert 1 <= refused.value.retry_after_seconds <= 60
    rate_limit_http(scope=RateLimitScope.AUTHORIZE, key="10.0.0.2")
    rate_limit_http(scope=RateLimitScope.LOGIN, key="10.0.0.1")
    with pytest.raises(RateLimited):
        rate_limit_http(scope=RateLimitScope.LOGIN, key="10.0.0.1")


@pytest.mark.django_db
def test_once_rules_are_cached_an_unlimited_request_costs_no_query_and_no_storage(
    limits_config, django_assert_num_queries
):
    limits_config(storage_url=NO_STORAGE_URL, cache_seconds=60)
    rate_limit_http(scope=RateLimitScope.LOGIN, key="10.0.0.1")
    with django_assert_num_queries(0):
        rate_limit_http(scope=RateLimitScope.LOGIN, key="10.0.0.1")
    limits_config(storage_url=NO_STORAGE_URL, cache_seconds=60, login="1/minute")
    with pytest.raises(ConfigurationError):
        rate_limit_http(scope=RateLimitScope.LOGIN, key="10.0.0.1")

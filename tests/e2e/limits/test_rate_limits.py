"""Rate limits hold across server processes that share the database and Redis, answer with the
documented error and retry hint, and never spend one person's budget on another's calls."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import httpx2
import pytest
import redis
from django.utils import timezone
from mcp.shared.exceptions import MCPError

from accounts.models import Tenant
from core.models import AuditAction, AuditEvent, AuditOutcome, RateLimitRule, RateLimitScope
from tests.e2e.conftest import _in_own_thread, person_of
from tests.e2e.harness import E2E_RATE_LIMIT_PREFIX, DaphneServer, Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.ratelimit_support import TEST_REDIS_URL

pytestmark = pytest.mark.django_db

RATE_LIMITED_CODE = -32029
REFUSAL = re.compile(r"Too many requests\. Limit: (?P<limit>.+)\. Retry in (?P<seconds>\d+) s\.")
COUNTED_METHODS = {"tools/call", "resources/read"}

AddRule = Callable[..., None]


def forget_counts() -> None:
    """Every server of the run counts in one Redis namespace; a test of limits starts it afresh."""
    store = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        keys = list(store.scan_iter(f"{E2E_RATE_LIMIT_PREFIX}:*"))
        if keys:
            store.delete(*keys)
    finally:
        store.close()


@pytest.fixture
def rate_limit_rule(django_db_blocker) -> Iterator[AddRule]:
    """Add a committed RateLimitRule, as an operator would in the admin; removed after the test."""
    made: list[int] = []
    forget_counts()

    def add(
        *, scope: RateLimitScope, target: str, limit: int, period_seconds: int = 60, tenant: str | None = None
    ) -> None:
        def write() -> int:
            rule = RateLimitRule.objects.create(
                scope=scope,
                target=target,
                limit=limit,
                period_seconds=period_seconds,
                tenant=Tenant.objects.get(slug=tenant) if tenant else None,
            )
            return rule.pk

        with django_db_blocker.unblock():
            made.append(_in_own_thread(write))

    yield add

    with django_db_blocker.unblock():
        _in_own_thread(lambda: RateLimitRule.objects.filter(pk__in=made).delete())
    forget_counts()


class Alternating(httpx2.AsyncHTTPTransport):
    """Sends each counted MCP request to the next server in turn (everything else to the first),
    and remembers which server took which."""

    def __init__(self, servers: list[DaphneServer]) -> None:
        super().__init__()
        self.ports = [server.port for server in servers]
        self.counted: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[0]
        if (
            request.method == "POST"
            and request.url.path == "/mcp"
            and json.loads(request.content).get("method") in COUNTED_METHODS
        ):
            port = self.ports[len(self.counted) % len(self.ports)]
            self.counted.append(port)
        request.url = request.url.copy_with(port=port)
        return await super().handle_async_request(request)


def assert_refused_with_retry_hint(error: MCPError, *, limit: str) -> None:
    assert error.code == RATE_LIMITED_CODE
    assert isinstance(error.data, dict)
    retry_after = error.data["retryAfterSeconds"]
    assert 1 <= retry_after <= 60
    assert error.data["limit"] == limit
    said = REFUSAL.fullmatch(error.message)
    assert said is not None, error.message
    assert said["limit"] == limit
    assert int(said["seconds"]) == retry_after


async def test_a_tool_limit_holds_across_two_servers_and_says_when_to_retry(
    server, second_server, committed, rate_limit_rule, own_admin
):
    rate_limit_rule(scope=RateLimitScope.TOOL, target="whoami", limit=3)
    started = timezone.now()
    balancer = Alternating([server, second_server])
    # The other tool renames its caller: a person of the test's own, not the demo's alice.
    async with minted_sdk_client(committed, server, person_of(own_admin), transport=balancer) as (client, _):
        allowed = [await client.call_tool("whoami", {}) for _ in range(3)]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("whoami", {})
        # Only whoami is limited: another tool of the same person still runs.
        other_tool = await client.call_tool("set_display_name", {"display_name": "Alice"})

    assert [result.is_error for result in allowed] == [False, False, False]
    assert balancer.counted[:4] == [server.port, second_server.port, server.port, second_server.port]
    assert_refused_with_retry_hint(refused.value, limit="3 per 1 minute")
    assert other_tool.is_error is False
    # The refusal is audited once, as a refusal and not as a call.
    events = [
        event
        async for event in AuditEvent.objects.filter(
            created__gte=started, username=own_admin.user.username, target="whoami"
        )
    ]
    assert (
        sorted(event.action for event in events) == [AuditAction.RATE_LIMITED] + [AuditAction.TOOL_CALLED] * 3
    )
    [refusal] = [event for event in events if event.action == AuditAction.RATE_LIMITED]
    assert refusal.outcome == AuditOutcome.DENIED
    assert refusal.detail["scope"] == "tool"
    assert refusal.detail["data"]["retryAfterSeconds"] == refused.value.data["retryAfterSeconds"]


async def test_another_person_s_calls_are_counted_apart_in_the_same_tenant_and_in_another(
    server, second_server, committed, rate_limit_rule
):
    rate_limit_rule(scope=RateLimitScope.TOOL, target="whoami", limit=3)
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        for _ in range(3):
            await client.call_tool("whoami", {})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("whoami", {})
    assert refused.value.code == RATE_LIMITED_CODE

    for name in ("bob", "carol"):
        balancer = Alternating([server, second_server])
        async with minted_sdk_client(committed, server, Person(name), transport=balancer) as (client, _):
            results = [await client.call_tool("whoami", {}) for _ in range(3)]
        assert [result.structured_content["user"]["username"] for result in results] == [name] * 3


async def test_resource_reads_under_a_tenant_s_prefix_rule_are_limited_across_servers(
    server, second_server, committed, rate_limit_rule, tenant_toolset
):
    tenant_toolset("acme", "conformance", enabled=True)
    rate_limit_rule(scope=RateLimitScope.RESOURCE, target="test://static", limit=2, tenant="acme")
    balancer = Alternating([server, second_server])
    async with minted_sdk_client(committed, server, Person("alice"), transport=balancer) as (client, _):
        await client.read_resource("test://static-text")
        await client.read_resource("test://static-binary")
        with pytest.raises(MCPError) as refused:
            await client.read_resource("test://static-text")
        # Outside the prefix, nothing is counted against it.
        watched = await client.read_resource("test://watched-resource")

    assert balancer.counted[:3] == [server.port, second_server.port, server.port]
    assert_refused_with_retry_hint(refused.value, limit="2 per 1 minute")
    assert watched.contents

    async with minted_sdk_client(
        committed, server, Person("bob"), transport=Alternating([second_server])
    ) as (client, _):
        read_by_bob = await client.read_resource("test://static-text")
    assert read_by_bob.contents

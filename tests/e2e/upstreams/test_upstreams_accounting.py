"""A forwarded call is accounted for as a local one is: one audit row naming the tool and the
upstream, the tenant's rate limits (-32029 when spent), and Prometheus' calls and latency per
upstream."""

from __future__ import annotations

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from accounts.models import Tenant
from core.models import AuditAction, AuditOutcome, RateLimitScope
from mcp_gateway.models import ChangeEvent, ChangeKind
from tests.e2e.harness import Person, free_port
from tests.e2e.limits.test_rate_limits import (  # noqa: F401 (a fixture)
    RATE_LIMITED_CODE,
    assert_refused_with_retry_hint,
    rate_limit_rule,
)
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.stamping import StampingTransport, audit_event_awaited
from tests.e2e.upstream_fixtures import remote_fields, stdio_fields
from tests.support.upstream_support import upstream_row
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db


async def test_a_forwarded_call_leaves_one_audit_row_naming_the_tool_and_the_upstream(
    server, committed, http_upstream
):
    committed(upstream_row, tenant="acme", name="audited", prefix_tools=True, **remote_fields(http_upstream))
    committed(
        upstream_row,
        tenant="acme",
        name="gone",
        url=f"http://127.0.0.1:{free_port()}/mcp",
        tool_names=["lost"],
        connect_timeout_seconds=5,
    )
    transport = StampingTransport()
    async with minted_sdk_client(committed, server, Person("alice"), transport=transport) as (client, _):
        await client.call_tool("audited_echo", {"text": "for the record"})
        await client.call_tool("audited_fail", {})
        with pytest.raises(MCPError):
            await client.call_tool("lost", {})
        await client.read_resource("upstream://notes/readme")
    echoed, failed, unreachable = [
        await audit_event_awaited(rid) for rid in transport.request_ids("tools/call")
    ]
    [read] = [await audit_event_awaited(rid) for rid in transport.request_ids("resources/read")]

    assert (echoed.action, echoed.outcome, echoed.target) == (
        AuditAction.TOOL_CALLED,
        AuditOutcome.OK,
        "audited_echo",
    )
    assert echoed.username == "alice"
    assert echoed.tenant is not None
    assert echoed.tenant.slug == "acme"
    assert echoed.detail["arguments"] == {"text": "for the record"}
    assert echoed.detail["result"]["upstream"] == "audited"
    assert (failed.outcome, failed.target, failed.detail["isError"]) == (
        AuditOutcome.ERROR,
        "audited_fail",
        True,
    )
    assert failed.detail["result"]["upstream"] == "audited"
    assert (unreachable.outcome, unreachable.target) == (AuditOutcome.ERROR, "lost")
    assert unreachable.detail["code"] == -32005
    assert unreachable.detail["result"]["upstream"] == "gone"
    assert (read.action, read.target) == (AuditAction.RESOURCE_READ, "upstream://notes/readme")
    assert read.detail["result"]["upstream"] == "audited"


async def test_a_rate_limit_refuses_forwarded_calls_as_it_refuses_local_ones(
    server,
    committed,
    http_upstream,
    rate_limit_rule,  # noqa: F811
):
    committed(upstream_row, tenant="acme", name="limited", prefix_tools=True, **remote_fields(http_upstream))
    rate_limit_rule(scope=RateLimitScope.TOOL, target="limited_echo", limit=2, tenant="acme")
    records_before = len(http_upstream.records())

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        allowed = [await client.call_tool("limited_echo", {"text": str(i)}) for i in range(2)]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("limited_echo", {"text": "one too many"})
        other = await client.call_tool("limited_received_headers", {})

    assert [result.is_error for result in allowed] == [False, False]
    assert refused.value.code == RATE_LIMITED_CODE
    assert_refused_with_retry_hint(refused.value, limit="2 per 1 minute")
    assert not other.is_error
    # The refused call never reached the upstream.
    echoes = [r for r in http_upstream.records()[records_before:] if r.get("tool") == "echo"]
    assert len(echoes) == 2


async def _scrape(server) -> dict[tuple[str, frozenset], float]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"{server.base_url}/metrics")
    assert response.status_code == 200, response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


async def test_metrics_count_forwarded_calls_and_their_latency_per_upstream(server, committed, http_upstream):
    committed(upstream_row, tenant="acme", name="measured", **remote_fields(http_upstream))
    committed(
        upstream_row,
        tenant="acme",
        name="unmeasurable",
        url=f"http://127.0.0.1:{free_port()}/mcp",
        tool_names=["missing"],
        connect_timeout_seconds=5,
    )
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        for _ in range(3):
            await client.call_tool("echo", {"text": "counted"})
        await client.call_tool("fail", {})
        with pytest.raises(MCPError):
            await client.call_tool("missing", {})
    samples = await _scrape(server)

    def value(name: str, **labels: str) -> float:
        return samples.get((name, frozenset(labels.items())), 0.0)

    calls = "gatehouse_upstream_calls_total"
    measured = {"upstream": "acme/measured", "method": "tools/call"}
    assert value(calls, **measured, outcome="ok") == 3
    assert value(calls, **measured, outcome="error") == 1
    assert value("gatehouse_upstream_call_seconds_count", **measured) == 4
    unmeasurable = {"upstream": "acme/unmeasurable", "method": "tools/call"}
    assert value(calls, **unmeasurable, outcome="unavailable") == 1


async def test_an_upstreams_flood_of_list_changed_is_a_change_or_two_and_past_a_bound_ends_its_session(
    server, committed
):
    """Shown failing before: each of the notifications became a change-log row, a NOTIFY to every
    worker and frames to every open stream of the tenant (nor were they counted); and an upstream
    that kept on was read to the last one, on the loop that serves every tenant's calls."""
    # stdio: the notifications go to this row's own child's session, which no other test shares.
    committed(upstream_row, tenant="acme", name="flooding", prefix_tools=True, **stdio_fields())
    acme = await Tenant.objects.aget(slug="acme")
    changes = ChangeEvent.objects.filter(tenant_id=acme.pk, kind=ChangeKind.UPSTREAM)
    before = await changes.acount()
    heard: dict[str, float] = {}

    async def count_heard() -> float:
        samples = await _scrape(server)
        for outcome in ("announced", "coalesced", "flooded"):
            key = frozenset({"upstream": "acme/flooding", "outcome": outcome}.items())
            heard[outcome] = samples.get(("gatehouse_upstream_notifications_total", key), 0.0)
        return sum(heard.values())

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        sent = await client.call_tool("flooding_flood_list_changed", {"count": 150})
        assert not sent.is_error, sent

        async def all_heard() -> bool:
            return await count_heard() == 150

        await eventually(all_heard, within=30, what="the 150 notifications heard")
        assert heard["announced"] <= 3, heard
        expected = before + int(heard["announced"])

        async def logged() -> bool:
            return await changes.acount() == expected

        await eventually(logged, within=10, what="one change logged per announcement")

        # Past FLOOD_LIMIT within the window, the session is ended and the call says why.
        with pytest.raises(MCPError) as flooded:
            await client.call_tool("flooding_flood_list_changed", {"count": 10_000})
        assert "ended its session" in flooded.value.error.message, flooded.value.error
        assert flooded.value.error.data == {"upstream": "flooding"}
        await count_heard()
        assert heard["flooded"] == 1, heard
        # No new session (nor child process) for the cooldown: the next call fails at once.
        with pytest.raises(MCPError) as cooling:
            await client.call_tool("flooding_echo", {"text": "still here"})
        assert "connects to it again in" in cooling.value.error.message, cooling.value.error

"""``subscriptions/listen`` streams over raw HTTP: list changes delivered across workers and only
to the tenant whose lists changed, and each stream bounded per person and per tenant.

No test waits for something not to happen: where a tenant must hear nothing of another's change,
the other tenant's change is made first and its own change after, and the stream's frames, which
arrive in order, show only its own."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest

from accounts.models import Role
from core.models import AuditAction, AuditEvent, AuditOutcome
from data_agent.models import Ontology, OntologyStatus
from data_agent.resources import ONTOLOGY_URI
from mcp_gateway.models import TenantToolset
from tests.e2e.mcp.modern_caller import (
    PROMPTS_CHANGED,
    RESOURCES_CHANGED,
    SUBSCRIPTION_ID,
    TOOLS_CHANGED,
    messages,
)
from tests.support.factories import OntologyFactory
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db


# List changes on subscriptions/listen.


async def test_a_toolset_change_on_another_worker_reaches_the_tenants_listen_stream(
    server, second_server, caller
):
    alice = caller(toolsets=["conformance"])
    async with alice.listen(server.mcp_url, {"toolsListChanged": True, "promptsListChanged": True}) as stream:
        await stream.acknowledged()
        response, messages = await alice.call_tool(second_server.mcp_url, "test_trigger_tool_change")
        assert response.status_code == 200, response.text
        assert "now on" in messages[-1]["result"]["content"][0]["text"]
        changed = {(await stream.next())["method"], (await stream.next())["method"]}
    assert changed == {TOOLS_CHANGED, PROMPTS_CHANGED}


async def test_each_notification_carries_the_subscription_id_and_the_filter_is_honoured(server, caller):
    alice = caller(toolsets=["conformance"])
    async with alice.listen(server.mcp_url, {"promptsListChanged": True}) as stream:
        ack = await stream.acknowledged()
        assert ack["params"]["notifications"] == {"promptsListChanged": True}
        await alice.call_tool(server.mcp_url, "test_trigger_tool_change")
        await alice.call_tool(server.mcp_url, "test_trigger_prompt_change")
        # Two changes, each of tools and prompts: only the prompts ones arrive.
        frames = [await stream.next(), await stream.next()]
    assert [f["method"] for f in frames] == [PROMPTS_CHANGED, PROMPTS_CHANGED]
    assert {f["params"]["_meta"][SUBSCRIPTION_ID] for f in frames} == {stream.subscription_id}


async def test_another_tenants_change_never_reaches_a_stream(server, second_server, caller, committed):
    """Tenant B's stream hears A's change (made first) not at all: the first frames it gets are
    those of its own change (made second), and they arrive in order."""
    alice = caller(toolsets=["conformance"])
    carol = caller(role=Role.VIEWER, scope="mcp:read")  # another tenant, a viewer's token
    filters = {"toolsListChanged": True, "resourcesListChanged": True}
    async with (
        carol.listen(server.mcp_url, filters) as theirs,
        alice.listen(server.mcp_url, filters) as ours,
    ):
        await theirs.acknowledged()
        await ours.acknowledged()
        await alice.call_tool(second_server.mcp_url, "test_trigger_tool_change")
        assert (await ours.next())["method"] == TOOLS_CHANGED
        # Carol's tenant turns on a toolset with resources as well: its change is tools, resources.
        committed(
            lambda: TenantToolset.objects.create(tenant=carol.tenant, toolset="conformance", enabled=True)
        )
        frames = [await theirs.next(), await theirs.next()]
    assert [f["method"] for f in frames] == [TOOLS_CHANGED, RESOURCES_CHANGED]


async def test_a_viewer_listens_but_cannot_change_the_lists(server, caller):
    bob = caller(role=Role.VIEWER, scope="mcp:read", toolsets=["conformance"])
    async with bob.listen(server.mcp_url, {"toolsListChanged": True}) as stream:
        await stream.acknowledged()
        response, messages = await bob.call_tool(server.mcp_url, "test_trigger_tool_change")
    # A scope the viewer's role can never hold: refused as JSON-RPC, with nothing to step up to.
    assert response.status_code == 200, response.text
    refusal = messages[-1]
    assert refusal["error"]["code"] == -32001, refusal
    assert refusal["error"]["data"] == {"required": ["mcp:write"], "missing": ["mcp:write"]}
    rows = await TenantToolset.objects.filter(tenant=bob.tenant, toolset="conformance_dynamic").acount()
    assert rows == 0


async def test_an_operators_change_in_another_process_reaches_the_stream(server, caller, committed):
    """The admin and ``manage.py toolsets`` write the row in their own process (here, the test's)."""
    alice = caller(toolsets=["conformance"])
    async with alice.listen(server.mcp_url, {"toolsListChanged": True}) as stream:
        await stream.acknowledged()
        committed(
            lambda: TenantToolset.objects.update_or_create(
                tenant=alice.tenant, toolset="conformance", defaults={"enabled": False}
            )
        )
        assert (await stream.next())["method"] == TOOLS_CHANGED
    # And the tenant's tools are gone indeed.
    _, [message] = await alice.call_tool(server.mcp_url, "test_simple_text")
    assert message["error"]["code"] == -32602, message


async def test_an_ontology_edited_elsewhere_reaches_a_listen_stream_subscribed_to_it(
    server, caller, committed
):
    alice = caller(toolsets=["data_agent"], scope="mcp:read ontologies:read")
    ontology = committed(OntologyFactory, tenant=alice.tenant, status=OntologyStatus.READY)
    uri = ONTOLOGY_URI.format(id=ontology.pk)
    other = committed(OntologyFactory, tenant=alice.tenant, status=OntologyStatus.READY)
    async with alice.listen(server.mcp_url, {"resourceSubscriptions": [uri]}) as stream:
        await stream.acknowledged()
        committed(lambda: Ontology.objects.get(pk=other.pk).save())  # not subscribed: not heard
        committed(lambda: Ontology.objects.get(pk=ontology.pk).save())
        updated = await stream.next()
    assert updated["method"] == "notifications/resources/updated"
    assert updated["params"]["uri"] == uri


# Bounds: one person cannot fill the tenant's streams.


async def test_one_person_holds_a_bounded_number_of_listen_streams_and_a_colleague_still_listens(
    server, caller
):
    """Shown failing before the bound: the eleventh listen was acknowledged and left open (the
    tenant's cap, 100 per worker, was the only one; its refusal left no audit row)."""
    alice = caller(toolsets=["conformance"])
    colleague = caller(tenant=alice.tenant, role=Role.VIEWER, scope="mcp:read")
    filters = {"toolsListChanged": True}
    async with AsyncExitStack() as held:
        # Kept referenced: a stream's line iterator, once collected, closes its response.
        streams = []
        for _ in range(10):  # MCP_STREAMS_PER_PERSON's default
            streams.append(await held.enter_async_context(alice.listen(server.mcp_url, filters)))
            await streams[-1].acknowledged()
        refused = await alice.listen_refused(server.mcp_url, filters)
        # A JSON-RPC error of this era, in a response that ends (HTTP 200, as the SDK maps -32000).
        assert refused.status_code == 200, refused.text
        [message] = messages(refused)
        assert message["error"]["code"] == -32000, message
        assert message["error"]["data"] == {"reason": "streams_per_person", "limit": 10}
        async with colleague.listen(server.mcp_url, filters) as theirs:
            await theirs.acknowledged()
    rows = AuditEvent.objects.filter(target="subscriptions/listen", user=alice.membership.user)
    await eventually(rows.aexists, within=10, what="the refusal's audit row")
    row = await rows.aget()
    assert (row.action, row.outcome) == (AuditAction.RATE_LIMITED, AuditOutcome.DENIED)
    assert row.detail["reason"] == "streams_per_person"
    # Closed streams free their places.
    async with alice.listen(server.mcp_url, filters) as again:
        await again.acknowledged()

"""``mcp_gateway.pipeline.list_changes``: which lists a toolset change changes, that a change reaches only
its tenant's streams, that malformed notifications are dropped, and the database trigger that
announces every change to a tenant's toolsets (PostgreSQL)."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)

from core.db import psycopg_connect_kwargs
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolsets_enabled, toolsets_enabled_cached
from mcp_gateway.models import ChangeEvent, TenantToolset
from mcp_gateway.pipeline.list_changes import ALL_EVENTS, CHANNEL, ListChanges, _Tenant
from tests.support.factories import TenantFactory


def _hub() -> ListChanges:
    return ListChanges(registry=default_registry(), postgres=True)


def _heard(hub: ListChanges, tenant_id: int) -> list[ServerEvent]:
    """What ``tenant_id``'s streams on ``hub`` hear (as if one were open)."""
    heard: list[ServerEvent] = []
    tenant = hub._tenants.setdefault(tenant_id, _Tenant())
    tenant.bus.subscribe(heard.append)
    return heard


def test_a_toolset_changes_the_lists_it_owns():
    hub = _hub()
    assert hub.events(toolsets=["conformance_dynamic"]) == (ToolsListChanged(), PromptsListChanged())
    assert hub.events(toolsets=["conformance"]) == (
        ToolsListChanged(),
        PromptsListChanged(),
        ResourcesListChanged(),
    )
    assert hub.events(toolsets=["account"]) == (ToolsListChanged(),)
    assert hub.events(toolsets=["no-such-toolset", ""]) == ()


async def test_a_change_reaches_its_tenants_streams_only():
    hub = _hub()
    ours, theirs = _heard(hub, 1), _heard(hub, 2)
    await hub.received(_payload(tenant=1, toolset="conformance_dynamic"))
    assert ours == [ToolsListChanged(), PromptsListChanged()]
    assert theirs == []


def _payload(*, tenant: int, toolset: str = "", kind: str = "toolset", uri: str | None = "") -> str:
    return json.dumps({"id": 5, "tenant": tenant, "kind": kind, "toolset": toolset, "uri": uri})


async def test_an_upstream_change_changes_every_list_and_a_resource_change_only_its_uri():
    hub = _hub()
    heard = _heard(hub, 1)
    await hub.received(_payload(tenant=1, kind="upstream"))
    await hub.received(_payload(tenant=1, kind="resource", uri="gatehouse://ontologies"))
    await hub.received(_payload(tenant=1, kind="resources_list"))
    assert heard == [*ALL_EVENTS, ResourceUpdated(uri="gatehouse://ontologies"), ResourcesListChanged()]


async def test_a_role_change_reaches_the_tenants_where_that_person_listens():
    hub = _hub()
    ours, theirs = _heard(hub, 1), _heard(hub, 2)
    hub._tenants[1].users[42] += 1
    await hub.identity_received(json.dumps({"kind": "user", "id": 42}))
    await hub.identity_received(json.dumps({"kind": "user", "id": 43}))
    malformed = ["", "[]", '{"kind": "user"}', '{"kind": "nope", "id": 42}', '{"kind": "user", "id": true}']
    for payload in malformed:
        await hub.identity_received(payload)
    assert ours == list(ALL_EVENTS)
    assert theirs == []


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "not json",
        "[]",
        "null",
        '{"tenant": 1}',
        '{"toolset": "conformance"}',
        '{"tenant": 1, "toolset": "conformance"}',
        '{"id": 1, "tenant": "1", "kind": "toolset", "toolset": "conformance"}',
        '{"id": 1, "tenant": true, "kind": "toolset", "toolset": "conformance"}',
        '{"id": "1", "tenant": 1, "kind": "toolset", "toolset": "conformance"}',
        '{"id": 1, "tenant": 1.5, "kind": "toolset", "toolset": "conformance"}',
        '{"id": 1, "tenant": 1, "kind": "toolset", "toolset": ["conformance"]}',
        '{"id": 1, "tenant": 1, "kind": "nope", "toolset": "conformance"}',
        '{"id": 1, "tenant": 1, "kind": "resource", "uri": 7}',
        '{"id": 1, "tenant": 1, "kind": "toolset", "toolset": "conformance\\u0000"}',
        "[" * 100_000,
        '{"id": 1, "tenant": 1, "kind": "toolset", "toolset": "' + "x" * 100_000 + '"}',
    ],
)
async def test_a_malformed_notification_is_dropped(payload):
    hub = _hub()
    heard = _heard(hub, 1)
    await hub.received(payload)
    assert heard == []


async def test_a_worker_that_lost_its_connection_tells_every_stream_everything_changed():
    hub = _hub()
    ours, theirs = _heard(hub, 1), _heard(hub, 2)
    await hub._everything_changed()
    assert ours == theirs == [ToolsListChanged(), PromptsListChanged(), ResourcesListChanged()]


@pytest.mark.django_db
def test_a_change_drops_the_workers_cached_toolsets(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "MCP_TOOLSET_CACHE_SECONDS": 60}
    tenant = TenantFactory.create()
    toolsets_enabled(tenant_id=tenant.pk, registry=default_registry())
    assert toolsets_enabled_cached(tenant_id=tenant.pk) is not None
    asyncio.run(_hub().changed(tenant_id=tenant.pk, toolsets=["conformance"]))
    assert toolsets_enabled_cached(tenant_id=tenant.pk) is None


@pytest.mark.django_db(transaction=True)
def test_the_database_announces_each_change_to_a_tenants_toolsets():
    """Whoever writes the row: insert, a change of ``enabled``, delete. A save that changes
    nothing is not announced (the next announcement is the next real change)."""
    tenant = TenantFactory.create()
    with psycopg.connect(**psycopg_connect_kwargs()) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        row = TenantToolset.objects.create(tenant=tenant, toolset="conformance", enabled=True)
        row.save()  # enabled unchanged: not announced
        TenantToolset.objects.filter(pk=row.pk).update(enabled=False)
        TenantToolset.objects.filter(pk=row.pk).delete()
        heard = [json.loads(n.payload) for n in listener.notifies(timeout=30, stop_after=3)]
    assert [(h["tenant"], h["kind"], h["toolset"], h["uri"]) for h in heard] == [
        (tenant.pk, "toolset", "conformance", "")
    ] * 3
    ids = [h["id"] for h in heard]
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    logged = ChangeEvent.objects.filter(pk__in=ids).values_list("tenant_id", "kind", "toolset")
    assert list(logged) == [(tenant.pk, "toolset", "conformance")] * 3


async def test_on_sqlite_a_logged_change_reaches_the_streams_of_its_tenant():
    """One process and no NOTIFY: ``changes`` hands a committed change to this process's hubs,
    from whatever thread wrote it."""
    from mcp_gateway.kernel.changes import Change, local_listeners

    hub = ListChanges(registry=default_registry(), postgres=False)
    try:
        hub._loop = asyncio.get_running_loop()
        heard = _heard(hub, 7)
        theirs = _heard(hub, 8)
        both = asyncio.Event()
        hub._tenants[7].bus.subscribe(lambda event: both.set() if len(heard) == 2 else None)
        change = Change(id=3, tenant_id=7, kind="toolset", toolset="conformance_dynamic")
        await asyncio.to_thread(hub._heard_locally, change)
        await both.wait()
        assert heard == [ToolsListChanged(), PromptsListChanged()]
        assert theirs == []
    finally:
        local_listeners.remove(hub._heard_locally)

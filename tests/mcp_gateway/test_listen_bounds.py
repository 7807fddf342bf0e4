"""``subscriptions/listen`` streams are bounded per person and per tenant on a worker
(``list_changes``, ``stream_bounds``); each refusal is -32000 naming the bound, with an audit row.
The end-to-end tests open real streams up to the person's bound and read the row; the tenant's
bound (a hundred streams) is checked here on the worker's own counts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from core.identity import Identity
from core.models import AuditAction
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.pipeline import stream_bounds
from mcp_gateway.pipeline.list_changes import MAX_STREAMS_PER_TENANT, ListChanges, _Tenant
from tests.support.identities import ALICE


@pytest.fixture
def audited(monkeypatch) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    async def record(**row: Any) -> None:
        rows.append(row)

    monkeypatch.setattr(stream_bounds, "edge_audit", record)
    return rows


@pytest.fixture
def changes() -> ListChanges:
    return ListChanges(registry=default_registry(), postgres=True)


async def _refusal(changes: ListChanges, identity: Identity, *, follows_tasks: bool = False) -> MCPError:
    with pytest.raises(MCPError) as refused:
        await changes._bound(identity=identity, follows_tasks=follows_tasks)
    return refused.value


async def test_a_full_tenant_refuses_the_next_person_with_its_own_reason(changes, audited):
    tenant = _Tenant()
    tenant.streams = MAX_STREAMS_PER_TENANT
    changes._tenants[ALICE.tenant_id] = tenant

    error = await _refusal(changes, ALICE)
    assert error.error.code == -32000
    assert error.error.data == {"reason": "streams_per_tenant", "limit": MAX_STREAMS_PER_TENANT}
    [row] = audited
    assert (row["action"], row["target"]) == (AuditAction.RATE_LIMITED, "subscriptions/listen")
    assert row["identity"] == ALICE
    # Task streams have a hundred of their own.
    await changes._bound(identity=ALICE, follows_tasks=True)
    # Another tenant is not concerned.
    await changes._bound(identity=replace(ALICE, tenant_id=11, user_id=2), follows_tasks=False)


async def test_the_person_bound_counts_across_tenants(changes, audited, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "MCP_STREAMS_PER_PERSON": 2}
    elsewhere = replace(ALICE, tenant_id=11)
    with changes._per_person.holding(identity=ALICE), changes._per_person.holding(identity=elsewhere):
        error = await _refusal(changes, ALICE)
        assert error.error.data == {"reason": "streams_per_person", "limit": 2}
        assert audited[0]["detail"] == {"reason": "streams_per_person", "limit": 2}
        # A colleague is not.
        await changes._bound(identity=replace(ALICE, user_id=2), follows_tasks=False)
    await changes._bound(identity=ALICE, follows_tasks=False)

"""Acme's ready "Sales analyst" workflow, so every workflow tool can be tried right after ``make run``.

Cheap when there is nothing to do (``make run`` calls it on every start): one query to see that the
workflow is there and whole. A query command left without its ontology (the sample database moved
between SQLite and PostgreSQL, which rebuilds the ontology) means the demo is re-imported.
"""

from __future__ import annotations

from pathlib import Path

from accounts.models import Tenant
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolset_set_enabled
from mcp_gateway.models import TenantToolset
from workflows.models import ActionKind, Workflow, WorkflowCommand
from workflows.services import workflow_import

DEMO_WORKFLOW_FILE = Path(__file__).resolve().parent / "demo" / "sales_analyst.yaml"
TOOLSET = "workflows"


def workflow_demo_ensure(*, tenant: Tenant) -> Workflow:
    """The demo workflow for ``tenant`` (imported when missing or broken) and its toolset on.

    Call after the sample database and its ontology exist (``data_agent.sample``)."""
    workflow = Workflow.objects.filter(tenant=tenant).first()
    broken = (
        workflow is not None
        and WorkflowCommand.objects.filter(
            context__workflow=workflow, action=ActionKind.QUERY, ontology__isnull=True
        ).exists()
    )
    if workflow is None or broken:
        workflow = workflow_import(tenant=tenant, source=DEMO_WORKFLOW_FILE.read_text(encoding="utf-8"))
    workflow_toolset_ensure(tenant=tenant)
    return workflow


def workflow_toolset_ensure(*, tenant: Tenant) -> bool:
    """Turn the workflows toolset on for ``tenant``; True when it was off (and this deployment
    serves it)."""
    # Loading the registry imports every toolset: only when there is something to do.
    if TenantToolset.objects.filter(tenant=tenant, toolset=TOOLSET, enabled=True).exists():
        return False
    registry = default_registry()
    if registry.toolset(TOOLSET) is None:
        return False
    toolset_set_enabled(tenant=tenant, toolset=TOOLSET, enabled=True, registry=registry)
    return True

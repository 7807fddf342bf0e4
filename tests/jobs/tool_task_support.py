"""Shared by the tool-task tests: the callers (identities of the conftest's people), the test
toolset switched on in this process, and the task's steps run here (``steps_run``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from accounts.models import Membership
from accounts.scopes import scopes_for_role
from core.identity import Identity
from jobs import step_loop as step_loop_module
from jobs.step_loop import step_loop_run, step_loop_stop
from jobs.tool_tasks import tool_task_get, tool_task_start
from mcp_gateway.kernel import toolset_access
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.tool_tasks_2026_07_28 import ToolTask
from mcp_gateway.pipeline import tool_runs as tool_call
from tests.jobs.support import steps_run
from tests.jobs.task_tools import TOOLSET_MODULE

TOOL_TASK_TEST_QUEUE = "tool-task-tests"
CLIENT_ID = "tool-task-test-client"
FORMS: dict[str, Any] = {"elicitation": {"form": {}}}


def identity_of(membership: Membership, *, scopes: frozenset[str] | None = None) -> Identity:
    return Identity(
        user_id=membership.user_id,
        username=membership.user.username,
        tenant_id=membership.tenant_id,
        tenant_slug=membership.tenant.slug,
        tenant_name=membership.tenant.name,
        role=membership.role,
        scopes=scopes_for_role(role=membership.role) if scopes is None else scopes,
        application_id=0,
        client_id=CLIENT_ID,
        client_name="Tool task tests",
        token_id=0,
    )


def toolsets_with_test_tools(settings: Any) -> list[str]:
    toolsets = [*settings.GATEHOUSE["GATEHOUSE_TOOLSETS"], TOOLSET_MODULE]
    settings.GATEHOUSE = {
        **settings.GATEHOUSE,
        "GATEHOUSE_TOOLSETS": toolsets,
        "MCP_TOOLSET_CACHE_SECONDS": 0,
    }
    return toolsets


@pytest.fixture
def task_tools(settings, monkeypatch) -> Iterator[None]:
    """The test tools served in this process, and tool tasks enqueued on a queue of their own (the
    session's end-to-end worker, which lacks the test tools, never takes them)."""
    toolsets_with_test_tools(settings)
    # The registry is cached per process: one built before (by an end-to-end test's fixtures, say)
    # lacks the test tools, and the task's server would find none of them; built again afterwards
    # without them, so no later test sees them.
    default_registry.cache_clear()
    monkeypatch.setattr(tool_call, "_server", None)
    # An answer cached by an earlier test for a tenant of the same id (sequences restart between
    # modules) would not know the test toolset.
    monkeypatch.setattr(toolset_access, "_cache", {})
    settings.GATEHOUSE = {**settings.GATEHOUSE, "JOBS_TOOL_TASK_QUEUE": TOOL_TASK_TEST_QUEUE}
    yield
    step_loop_close()
    default_registry.cache_clear()


def step_loop_close() -> None:
    """The step loop's pooled and thread connections closed (the test database must be droppable),
    and the loop stopped; the next test starts another."""
    from core import db

    async def close() -> None:
        pool, db._pool._pool = db._pool._pool, None
        if pool is not None:
            await pool.close()
        await sync_to_async(connections.close_all)()

    if step_loop_module._loop is not None:
        step_loop_run(close())
    step_loop_stop()


def start(identity: Identity, tool: str, arguments: dict[str, Any] | None = None, **extra: Any) -> ToolTask:
    return tool_task_start(
        identity=identity,
        tool=tool,
        arguments=arguments or {},
        client_capabilities=extra.pop("client_capabilities", FORMS),
        ttl_ms=extra.pop("ttl_ms", None),
    )


def run_and_get(identity: Identity, task: ToolTask) -> ToolTask:
    steps_run()
    return tool_task_get(identity=identity, task_id=task.task_id)

"""MCP tasks without a server: the job-to-task mapping (``research.tasks``), the protocol's ``Task``
on the wire (``mcp_gateway.kernel.tasks_2025_11_25``) and which tools the registry runs as tasks."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from mcp_types import CallToolResult, GetTaskResult, ListToolsResult, Tool, ToolExecution
from mcp_types.methods import SPEC_CLIENT_METHODS, serialize_server_result

from jobs.models import Job, JobState
from mcp_gateway.kernel.registry import Registry, Toolset, tool
from mcp_gateway.kernel.tasks_2025_11_25 import TaskState
from research.tasks import LiteratureTasks, literature_tasks, task_result, task_state

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _job(state: str, **fields: Any) -> Job:
    return Job(id=uuid.uuid4(), state=state, created=NOW, updated=NOW, **fields)


@pytest.mark.parametrize(
    ("state", "status"),
    [
        (JobState.RUNNING, "working"),
        (JobState.WAITING, "input_required"),
        (JobState.COMPLETE, "completed"),
        (JobState.FAILED, "failed"),
        (JobState.CANCELLED, "cancelled"),
    ],
)
def test_every_job_state_is_a_task_status_the_protocol_knows(state, status):
    job = _job(state, checkpoint_kind="plan" if state == JobState.WAITING else "")
    wire = task_state(job=job).wire()
    assert wire["status"] == status
    assert wire["taskId"] == str(job.id)
    assert wire["statusMessage"]
    # The SDK's own model of the answer accepts it.
    assert GetTaskResult.model_validate(wire, by_name=False).status == status


def test_a_waiting_task_says_which_decision_it_waits_for():
    job = _job(JobState.WAITING, checkpoint_kind="screening")
    message = task_state(job=job).status_message
    assert "screening" in message
    assert str(job.id) in message


def test_a_failed_task_carries_the_jobs_error_and_its_result_is_an_error():
    job = _job(JobState.FAILED, error="every source failed")
    assert task_state(job=job).status_message == "every source failed"
    result = task_result(job=job)
    assert result["isError"] is True
    assert result["structuredContent"]["status"] == "failed"
    CallToolResult.model_validate(result, by_name=False)


def test_a_waiting_tasks_result_is_the_pending_checkpoint():
    job = _job(JobState.WAITING, checkpoint_kind="plan", checkpoint={"summary": "Terms", "terms": ["a"]})
    result = task_result(job=job)
    assert not result.get("isError")
    assert result["structuredContent"]["checkpoint"] == {
        "id": "plan-0",
        "kind": "plan",
        "summary": "Terms",
        "terms": ["a"],
    }


def test_the_wire_task_keeps_a_null_ttl_and_leaves_out_an_empty_message():
    wire = TaskState(task_id="t", status="working", created_at=NOW, last_updated_at=NOW).wire()
    assert wire["ttl"] is None
    assert "statusMessage" not in wire
    assert "pollInterval" not in wire


def test_cancelling_needs_write_and_reading_needs_read():
    assert literature_tasks.scopes_for(method="tasks/cancel") == {"mcp:write"}
    assert literature_tasks.scopes_for(method="tasks/get") == {"mcp:read"}
    assert literature_tasks.scopes_for(method="tasks/result") == {"mcp:read"}


async def _noop() -> str:
    return ""


def test_the_registry_runs_as_tasks_only_tools_the_toolset_has():
    search = tool(name="search_papers", description="d", scopes=["mcp:read"])(_noop)
    other = tool(name="other", description="d", scopes=["mcp:read"])(_noop)
    with_tool = Toolset(name="with", description="d", tools=(search, other), tasks=LiteratureTasks())
    without_tool = Toolset(name="without", description="d", tasks=LiteratureTasks())
    registry = Registry([with_tool, without_tool])
    assert registry.task_source("search_papers") is with_tool.tasks
    assert registry.task_source("other") is None
    assert registry.task_source("missing") is None
    assert registry.task_sources(enabled=frozenset({"with", "without"})) == (with_tool.tasks,)
    assert registry.task_sources(enabled=frozenset({"without"})) == ()


def test_the_sdk_serves_no_tasks_method_and_sieves_a_create_task_result_away():
    # What docs/mcp-tasks.md records, so that an SDK upgrade that changes it fails here.
    assert not [method for method in SPEC_CLIENT_METHODS if method.startswith("tasks/")]
    task = TaskState(task_id="t", status="working", created_at=NOW, last_updated_at=NOW).wire()
    with pytest.raises(ValueError, match="CallToolResult"):
        serialize_server_result("tools/call", "2025-11-25", {"task": task})
    listed = serialize_server_result(
        "tools/list",
        "2025-11-25",
        ListToolsResult(
            tools=[
                Tool(
                    name="a",
                    input_schema={"type": "object"},
                    execution=ToolExecution(task_support="optional"),
                )
            ]
        ).model_dump(by_alias=True, exclude_none=True),
    )
    assert listed["tools"][0]["execution"] == {"taskSupport": "optional"}

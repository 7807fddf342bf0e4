"""``mcp_gateway.pipeline.task_status_2026_07_28``: screening a listen filter's ``taskIds``, waking only the
streams of the task's own person and tenant, dropping malformed notifications, and the jobs table's trigger
that announces a tool task's visible changes (PostgreSQL)."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import SubscriptionFilter, SubscriptionsListenRequestParams

from core.db import psycopg_connect_kwargs
from jobs.models import Job, JobState
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.pipeline import list_changes
from mcp_gateway.pipeline.list_changes import ListChanges
from mcp_gateway.pipeline.task_status_2026_07_28 import (
    MAX_TASK_IDS,
    TASK_CHANNEL,
    TaskStatusChanged,
    TaskWatchers,
    task_ids_requested,
    task_status_params,
)
from tests.support.factories import MembershipFactory
from tests.support.identities import ALICE


def _filter(**extra: object) -> SubscriptionFilter:
    return SubscriptionFilter.model_validate(extra)


def test_task_ids_are_screened():
    assert task_ids_requested(_filter(toolsListChanged=True)) is None
    assert task_ids_requested(_filter(taskIds=None)) is None
    hostile = [1, None, True, {"a": 1}, ["b"], "a\u0000b", "x" * 5000, "", "\u0007", "t1", "t1", "t2"]
    assert task_ids_requested(_filter(taskIds=hostile)) == ["t1", "t2"]
    assert task_ids_requested(_filter(taskIds=["t"] * MAX_TASK_IDS)) == ["t"]


@pytest.mark.parametrize("value", ["t1", {"t1": True}, 3, ["t"] * (MAX_TASK_IDS + 1)])
def test_a_filter_that_is_not_a_short_list_is_invalid_params(value):
    with pytest.raises(MCPError) as raised:
        task_ids_requested(_filter(taskIds=value))
    assert raised.value.error.code == -32602


def test_a_change_wakes_only_the_streams_of_its_person_and_tenant():
    watchers = TaskWatchers()
    ours: list[TaskStatusChanged] = []
    same_person_other_tenant: list[TaskStatusChanged] = []
    other_person: list[TaskStatusChanged] = []
    unwatch = watchers.watch(identity=ALICE, task_ids=["t1", "t2"], deliver=ours.append)
    watchers.watch(
        identity=replace(ALICE, tenant_id=11), task_ids=["t1"], deliver=same_person_other_tenant.append
    )
    watchers.watch(identity=replace(ALICE, user_id=2), task_ids=["t1"], deliver=other_person.append)
    watchers.changed(task_id="t1", tenant_id=10, user_id=1)
    watchers.changed(task_id="t3", tenant_id=10, user_id=1)
    assert ours == [TaskStatusChanged("t1")]
    assert same_person_other_tenant == other_person == []
    unwatch()
    unwatch()
    watchers.changed(task_id="t2", tenant_id=10, user_id=1)
    assert ours == [TaskStatusChanged("t1")]
    assert len(watchers) == 1  # t1, still watched by the other two


def test_status_params_are_tasks_gets_answer_with_the_streams_tag():
    wire = {"resultType": "complete", "taskId": "t", "status": "working", "ttlMs": None}
    meta = {"io.modelcontextprotocol/subscriptionId": 4}
    assert task_status_params(wire, meta=meta) == {
        "taskId": "t",
        "status": "working",
        "ttlMs": None,
        "_meta": meta,
    }


@pytest.mark.parametrize(
    "payload",
    [
        "not json",
        "[]",
        "{}",
        json.dumps({"task": 1, "tenant": 10, "user": 1}),
        json.dumps({"task": "t1", "tenant": "10", "user": 1}),
        json.dumps({"task": "t1", "tenant": 10, "user": True}),
        "[" * 100_000,
    ],
)
def test_a_malformed_task_notification_is_dropped(payload):
    hub = ListChanges(registry=default_registry(), postgres=True)
    heard: list[TaskStatusChanged] = []
    hub.task_watchers.watch(identity=ALICE, task_ids=["t1"], deliver=heard.append)
    hub.task_received(payload)
    assert heard == []
    hub.task_received(json.dumps({"task": "t1", "tenant": 10, "user": 1}))
    assert heard == [TaskStatusChanged("t1")]


@pytest.mark.django_db(transaction=True)
def test_the_database_announces_a_tool_tasks_visible_changes_only():
    """State, checkpoint and progress message of an ``mcp.tool_call`` job; not a heartbeat, not
    another kind's job."""
    membership = MembershipFactory.create()
    owner = {"tenant": membership.tenant, "user": membership.user}
    task = Job.objects.create(kind="mcp.tool_call", **owner)
    other = Job.objects.create(kind="something.else", **owner)
    with psycopg.connect(**psycopg_connect_kwargs()) as listener:
        listener.execute(f"LISTEN {TASK_CHANNEL}")
        Job.objects.filter(pk=other.pk).update(state=JobState.CANCELLED)
        Job.objects.filter(pk=task.pk).update(step_worker="w1")  # not visible: not announced
        Job.objects.filter(pk=task.pk).update(progress_message="Half way")
        Job.objects.filter(pk=task.pk).update(state=JobState.WAITING, checkpoint_kind="input_required")
        Job.objects.filter(pk=task.pk).update(state=JobState.CANCELLED)
        heard = [json.loads(n.payload) for n in listener.notifies(timeout=30, stop_after=3)]
    expected = {"task": str(task.pk), "tenant": membership.tenant_id, "user": membership.user_id}
    assert heard == [expected] * 3


def _listen_params(task_ids: object) -> SubscriptionsListenRequestParams:
    return SubscriptionsListenRequestParams.model_validate({"notifications": {"taskIds": task_ids}})


def _declaring(*, declares: bool) -> Any:
    extensions: dict[str, Any] = {"io.modelcontextprotocol/tasks": {}} if declares else {}
    meta = {"io.modelcontextprotocol/clientCapabilities": {"extensions": extensions}}
    return SimpleNamespace(params={"notifications": {}, "_meta": meta})


async def test_task_ids_are_honoured_only_where_offered_declared_and_readable(monkeypatch):
    hub = ListChanges(registry=default_registry(), postgres=True)
    offered = {"value": False}

    async def tasks_offered(**_: Any) -> bool:
        return offered["value"]

    monkeypatch.setattr(list_changes, "tasks_offered", tasks_offered)
    params = _listen_params(["t1"])
    # Not offered: a key this server does not know, left out of the acknowledgement.
    assert await hub._task_ids(_declaring(declares=True), ALICE, params) is None
    offered["value"] = True
    assert await hub._task_ids(_declaring(declares=True), ALICE, params) == ["t1"]
    no_read = replace(ALICE, scopes=frozenset())
    assert await hub._task_ids(_declaring(declares=True), no_read, params) is None
    with pytest.raises(MCPError) as raised:
        await hub._task_ids(_declaring(declares=False), ALICE, params)
    assert raised.value.error.code == -32021
    nothing = SubscriptionsListenRequestParams.model_validate({"notifications": {}})
    assert await hub._task_ids(_declaring(declares=False), ALICE, nothing) is None

"""Tool tasks on the job engine, in one process (steps run by the worker's own loop here): what each
kind of answer becomes, input rounds, cancel, ownership and hostile input. The same with real
worker processes is in test_tool_tasks_workers.py."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone
from mcp.server import request_state as request_state_module

from accounts.scopes import SCOPE_READ
from core.errors import InvalidInput, NotFound
from core.models import AuditEvent, RateLimitScope
from jobs.models import Job, JobState
from jobs.tool_task_kind import TOOL_TASK_KIND
from jobs.tool_tasks import (
    ARGUMENTS_MAX_BYTES,
    CAPABILITIES_MAX_BYTES,
    INPUT_RESPONSES_MAX_BYTES,
    POLL_INTERVAL_MS,
    TTL_DEFAULT_MS,
    TTL_MAX_MS,
    TTL_MIN_MS,
    JobToolTaskRunner,
    tool_task_cancel,
    tool_task_get,
    tool_task_update,
    tool_tasks_expire,
)
from mcp_gateway.kernel.tool_tasks_2026_07_28 import ToolTask, tool_task_runner
from tests.jobs.support import steps_run
from tests.jobs.task_tools import CRASH_DETAIL, SOFT_ERROR
from tests.jobs.tool_task_support import identity_of, run_and_get, start, task_tools  # noqa: F401
from tests.support.factories import RateLimitRuleFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("task_tools")]


def text_of(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


def result_of(task: ToolTask) -> dict[str, Any]:
    assert task.result is not None, task
    return task.result


def error_of(task: ToolTask) -> dict[str, Any]:
    assert task.error is not None, task
    return task.error


def test_the_jobs_app_registers_its_runner():
    assert isinstance(tool_task_runner(), JobToolTaskRunner)


def test_a_task_is_working_at_once_then_completed_with_the_tools_result(owner):
    me = identity_of(owner)
    task = start(me, "tt_echo", {"text": "hello"})
    assert task.status == "working"
    assert task.poll_interval_ms == POLL_INTERVAL_MS
    assert task.ttl_ms == TTL_DEFAULT_MS
    done = run_and_get(me, task)
    assert done.status == "completed"
    assert text_of(result_of(done)) == "hello"
    assert result_of(done).get("isError") is not True
    assert done.error is None
    assert done.poll_interval_ms is None


def test_the_call_goes_through_the_audit_trail_as_the_tasks_person(owner):
    me = identity_of(owner)
    task = start(me, "tt_echo", {"text": "audited"})
    run_and_get(me, task)
    events = AuditEvent.objects.filter(user_id=owner.user_id, tenant_id=owner.tenant_id)
    called = [(e.target, e.request_id, e.client_id) for e in events if e.action == "tool.called"]
    assert called == [("tt_echo", f"task:{task.task_id}", me.client_id)]


def test_a_tool_error_completes_the_task_with_is_error(owner):
    me = identity_of(owner)
    done = run_and_get(me, start(me, "tt_soft_error"))
    assert done.status == "completed"
    assert result_of(done)["isError"] is True
    assert SOFT_ERROR in text_of(result_of(done))


def test_a_crash_fails_the_task_with_a_json_rpc_error_that_keeps_internals_out(owner):
    me = identity_of(owner)
    done = run_and_get(me, start(me, "tt_crash"))
    assert done.status == "failed"
    assert error_of(done)["code"] == -32603
    assert CRASH_DETAIL not in str(done.error)
    assert done.result is None


def test_a_timeout_fails_the_task_with_the_timeout_error(owner):
    me = identity_of(owner)
    done = run_and_get(me, start(me, "tt_timeout"))
    assert done.status == "failed"
    assert error_of(done)["code"] == -32004


def test_the_guard_still_checks_scopes_when_the_task_runs(owner):
    me = identity_of(owner, scopes=frozenset({SCOPE_READ}))
    done = run_and_get(me, start(me, "tt_write"))
    assert done.status == "failed"
    assert error_of(done)["code"] == -32003 or "scope" in error_of(done)["message"].lower()


def test_a_person_removed_from_the_tenant_meanwhile_gets_a_failed_task(owner):
    me = identity_of(owner)
    task = start(me, "tt_echo", {"text": "too late"})
    owner.delete()
    job = Job.objects.get(pk=task.task_id)
    assert job.state == JobState.RUNNING
    steps_run()
    job.refresh_from_db()
    assert "error" in (job.result or {})


def test_input_required_then_update_then_completed(owner):
    me = identity_of(owner)
    task = start(me, "tt_ask", {"question": "Which quarter?"})
    waiting = run_and_get(me, task)
    assert waiting.status == "input_required"
    request = (waiting.input_requests or {})["answer"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Which quarter?"
    # The sealed state stays in the row, never in what the client sees.
    assert "requestState" not in str(waiting)
    assert Job.objects.get(pk=task.task_id).context["request_state"]

    tool_task_update(
        identity=me,
        task_id=task.task_id,
        input_responses={"answer": {"action": "accept", "content": {"answer": "Q3"}}},
    )
    assert tool_task_get(identity=me, task_id=task.task_id).status == "working"
    done = run_and_get(me, task)
    assert done.status == "completed"
    assert text_of(result_of(done)) == "Which quarter? -> Q3"


def test_an_update_of_a_task_that_is_not_waiting_is_refused(owner):
    me = identity_of(owner)
    task = start(me, "tt_echo", {"text": "x"})
    with pytest.raises(InvalidInput):
        tool_task_update(identity=me, task_id=task.task_id, input_responses={"a": {"action": "cancel"}})
    run_and_get(me, task)
    with pytest.raises(InvalidInput):
        tool_task_update(identity=me, task_id=task.task_id, input_responses={"a": {"action": "cancel"}})


def test_cancel_is_at_once_and_idempotent_and_the_step_does_nothing(owner):
    me = identity_of(owner)
    task = start(me, "tt_echo", {"text": "never"})
    tool_task_cancel(identity=me, task_id=task.task_id)
    assert tool_task_get(identity=me, task_id=task.task_id).status == "cancelled"
    tool_task_cancel(identity=me, task_id=task.task_id)
    assert run_and_get(me, task).status == "cancelled"


def test_cancel_of_a_finished_task_leaves_it_as_it_is(owner):
    me = identity_of(owner)
    task = start(me, "tt_echo", {"text": "kept"})
    run_and_get(me, task)
    tool_task_cancel(identity=me, task_id=task.task_id)
    assert tool_task_get(identity=me, task_id=task.task_id).status == "completed"


@pytest.mark.parametrize("action", ["get", "update", "cancel"])
def test_another_persons_or_tenants_task_is_not_found(owner, member, outsider, action):
    task = start(identity_of(owner), "tt_ask", {"question": "mine?"})
    run_and_get(identity_of(owner), task)
    calls = {
        "get": lambda who: tool_task_get(identity=who, task_id=task.task_id),
        "update": lambda who: tool_task_update(identity=who, task_id=task.task_id, input_responses={}),
        "cancel": lambda who: tool_task_cancel(identity=who, task_id=task.task_id),
    }
    for stranger in (member, outsider):
        with pytest.raises(NotFound):
            calls[action](identity_of(stranger))
    assert tool_task_get(identity=identity_of(owner), task_id=task.task_id).status == "input_required"


def test_the_same_person_in_another_tenant_does_not_see_the_task(owner, outsider):
    task = start(identity_of(owner), "tt_echo", {"text": "x"})
    elsewhere = identity_of(owner)
    from dataclasses import replace

    with pytest.raises(NotFound):
        tool_task_get(identity=replace(elsewhere, tenant_id=outsider.tenant_id), task_id=task.task_id)


@pytest.mark.parametrize(
    "task_id",
    ["", "not-a-uuid", "0" * 10_000, "\x00", "\ud800", "00000000-0000-0000-0000-000000000000", 42, None],
)
def test_malformed_and_unknown_ids_are_not_found(owner, task_id):
    with pytest.raises(NotFound):
        tool_task_get(identity=identity_of(owner), task_id=task_id)


def test_another_kind_of_job_is_not_a_task(owner):
    from jobs.services import job_start
    from tests.jobs.engine_kind import ENGINE_TEST_KIND, engine_kind_register

    engine_kind_register()
    job = job_start(tenant_id=owner.tenant_id, user_id=owner.user_id, kind=ENGINE_TEST_KIND, job_input={})
    me = identity_of(owner)
    with pytest.raises(NotFound):
        tool_task_get(identity=me, task_id=str(job.pk))
    with pytest.raises(NotFound):
        tool_task_cancel(identity=me, task_id=str(job.pk))
    job.refresh_from_db()
    assert job.state == JobState.RUNNING


def test_nul_bytes_and_unpaired_surrogates_survive_the_row(owner):
    me = identity_of(owner)
    text = "a\x00b \ud800 é"
    done = run_and_get(me, start(me, "tt_echo", {"text": "a\x00b é"}))
    assert text_of(result_of(done)) == "a\x00b é"
    # The guard refuses the surrogate as the client's mistake, and the task says so.
    refused = run_and_get(me, start(me, "tt_echo", {"text": text}))
    assert refused.status == "failed"
    assert error_of(refused)["code"] == -32602


def test_huge_and_deeply_nested_arguments_are_refused_at_start(owner):
    me = identity_of(owner)
    with pytest.raises(InvalidInput):
        start(me, "tt_echo", {"text": "x" * (ARGUMENTS_MAX_BYTES + 1)})
    deep: dict = {}
    node = deep
    for _ in range(100_000):
        node["d"] = {}
        node = node["d"]
    with pytest.raises(InvalidInput):
        start(me, "tt_echo", {"text": "deep", "nested": deep})
    assert not Job.objects.filter(kind=TOOL_TASK_KIND).exists()


def test_moderately_nested_arguments_are_run(owner):
    me = identity_of(owner)
    nested: dict = {}
    node = nested
    for _ in range(50):
        node["d"] = {}
        node = node["d"]
    done = run_and_get(me, start(me, "tt_echo", {"text": "ok", "nested": nested}))
    assert done.status == "completed"


def test_an_unknown_tool_fails_the_task(owner):
    me = identity_of(owner)
    done = run_and_get(me, start(me, "no_such_tool"))
    assert done.status == "failed"
    assert error_of(done)["code"] == -32602


def test_ttl_is_kept_within_bounds_and_an_expired_task_is_not_found(owner):
    me = identity_of(owner)
    assert start(me, "tt_echo", {"text": "x"}, ttl_ms=1).ttl_ms == TTL_MIN_MS
    assert start(me, "tt_echo", {"text": "x"}, ttl_ms=10**15).ttl_ms == TTL_MAX_MS
    task = start(me, "tt_echo", {"text": "x"}, ttl_ms=TTL_MIN_MS)
    Job.objects.filter(pk=task.task_id).update(created=task.created_at.replace(year=2000))
    with pytest.raises(NotFound):
        tool_task_get(identity=me, task_id=task.task_id)


def test_the_runner_speaks_the_contract_from_an_event_loop(owner):
    me = identity_of(owner)
    runner = JobToolTaskRunner()
    task = async_to_sync(runner.start)(
        identity=me, tool="tt_echo", arguments={"text": "async"}, client_capabilities={}, ttl_ms=None
    )
    run_and_get(me, task)
    done = async_to_sync(runner.get)(identity=me, task_id=task.task_id)
    assert text_of(result_of(done)) == "async"
    async_to_sync(runner.cancel)(identity=me, task_id=task.task_id)
    with pytest.raises(NotFound):
        async_to_sync(runner.get)(identity=me, task_id="nope")


def test_tasks_past_their_ttl_are_deleted_and_a_running_one_cancelled_first(owner):
    me = identity_of(owner)
    finished = start(me, "tt_echo", {"text": "old"}, ttl_ms=TTL_MIN_MS)
    run_and_get(me, finished)
    running = start(me, "tt_echo", {"text": "old too"}, ttl_ms=TTL_MIN_MS)
    fresh = start(me, "tt_echo", {"text": "new"})
    past = timezone.now() - timedelta(milliseconds=TTL_MIN_MS + 1000)
    Job.objects.filter(pk__in=[finished.task_id, running.task_id]).update(created=past)

    assert tool_tasks_expire() == 2
    assert not Job.objects.filter(pk=finished.task_id).exists()
    assert Job.objects.get(pk=running.task_id).state == JobState.CANCELLED
    assert tool_tasks_expire() == 1
    assert not Job.objects.filter(pk=running.task_id).exists()
    assert tool_task_get(identity=me, task_id=fresh.task_id).status == "working"


def test_the_tasks_own_call_does_not_spend_the_rate_limit_again(owner):
    RateLimitRuleFactory(scope=RateLimitScope.TOOL, limit=1, period_seconds=3600)
    me = identity_of(owner)
    # The extension's layer counts the call when the task starts; the run is not counted again.
    done = [run_and_get(me, start(me, "tt_echo", {"text": str(n)})) for n in range(3)]
    assert [task.status for task in done] == ["completed"] * 3


def test_hostile_input_responses_are_refused_or_kept_as_sent(owner):
    me = identity_of(owner)
    task = start(me, "tt_ask", {"question": "Name?"})
    run_and_get(me, task)
    with pytest.raises(InvalidInput):
        tool_task_update(
            identity=me,
            task_id=task.task_id,
            input_responses={
                "answer": {"action": "accept", "content": {"answer": "x" * INPUT_RESPONSES_MAX_BYTES}}
            },
        )
    with pytest.raises(InvalidInput):
        tool_task_update(identity=me, task_id=task.task_id, input_responses=["not", "an", "object"])  # type: ignore[arg-type]
    assert tool_task_get(identity=me, task_id=task.task_id).status == "input_required"
    tool_task_update(
        identity=me,
        task_id=task.task_id,
        input_responses={"answer": {"action": "accept", "content": {"answer": "nul\x00byte"}}},
    )
    done = run_and_get(me, task)
    assert text_of(result_of(done)) == "Name? -> nul\x00byte"


def test_huge_client_capabilities_are_refused_at_start(owner):
    with pytest.raises(InvalidInput):
        start(
            identity_of(owner),
            "tt_echo",
            {"text": "x"},
            client_capabilities={"x": "y" * CAPABILITIES_MAX_BYTES},
        )


def test_input_given_hours_later_still_resumes_the_task(owner, monkeypatch):
    me = identity_of(owner)
    task = start(me, "tt_ask", {"question": "Later?"})
    run_and_get(me, task)
    tool_task_update(
        identity=me,
        task_id=task.task_id,
        input_responses={"answer": {"action": "accept", "content": {"answer": "yes"}}},
    )
    # The sealed state outlives the endpoint's 10 minutes: the person answered a day later.
    later = time.time() + 24 * 3600
    monkeypatch.setattr(request_state_module.time, "time", lambda: later)
    done = run_and_get(me, task)
    assert done.status == "completed", done
    assert text_of(result_of(done)) == "Later? -> yes"

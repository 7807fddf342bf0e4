"""tasks/update answering some of a task's input requests (SEP-2663 partial fulfillment): the
answers are kept, the task stays input_required with only the unanswered requests, and it runs on,
with every answer, once none is left."""

from __future__ import annotations

import json

import pytest

from jobs.models import Job, JobState
from jobs.tool_tasks import tool_task_get, tool_task_update
from tests.jobs.tool_task_support import identity_of, run_and_get, start, task_tools  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("task_tools")]

ACCEPTED = {"action": "accept", "content": {"answer": "Q3"}}


def _waiting_on_two(me):
    task = start(me, "tt_ask", {"question": "Which quarter?"})
    waiting = run_and_get(me, task)
    assert waiting.status == "input_required"
    # A second request beside the tool's own, as a tool asking two things at once leaves them.
    job = Job.objects.get(pk=task.task_id)
    requests = {**(waiting.input_requests or {}), "other": {"method": "elicitation/create", "params": {}}}
    job.checkpoint = {**(job.checkpoint or {}), "inputRequests": json.dumps(requests)}
    job.save(update_fields=["checkpoint"])
    return task


def test_answers_to_some_requests_are_kept_and_the_task_waits_for_the_rest(owner):
    me = identity_of(owner)
    task = _waiting_on_two(me)

    tool_task_update(identity=me, task_id=task.task_id, input_responses={"answer": ACCEPTED})
    partial = tool_task_get(identity=me, task_id=task.task_id)
    assert partial.status == "input_required"
    assert set(partial.input_requests or {}) == {"other"}

    tool_task_update(identity=me, task_id=task.task_id, input_responses={"other": {"action": "decline"}})
    assert Job.objects.get(pk=task.task_id).state == JobState.RUNNING
    done = run_and_get(me, task)
    assert done.status == "completed"
    # The tool ran with the answer given in the first update.
    assert done.result is not None
    assert done.result["content"][0]["text"] == "Which quarter? -> Q3"


def test_an_update_answering_nothing_pending_leaves_the_task_as_it_is(owner):
    me = identity_of(owner)
    task = start(me, "tt_ask", {"question": "Which quarter?"})
    before = run_and_get(me, task)
    tool_task_update(identity=me, task_id=task.task_id, input_responses={"unknown-key": {"ignored": True}})
    after = tool_task_get(identity=me, task_id=task.task_id)
    assert after.status == "input_required"
    assert after.input_requests == before.input_requests

"""``ask_question`` as a tool task, in one process (steps run here), with the model scripted through
litellm's ``mock_response``: the planner's clarifying question becomes the task's
``input_required``, the person's answer resumes it, and the run completes with the tool's answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from data_agent.ask_tool import CLARIFY_INPUT
from jobs.models import Job
from jobs.tool_tasks import tool_task_get, tool_task_update
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolset_set_enabled
from tests.jobs.tool_task_support import identity_of, run_and_get, start, task_tools  # noqa: F401
from tests.support.factories import DatasetFactory, LanguageModelFactory, OntologyFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("task_tools")]

CLARIFY = {
    "action": "clarify",
    "clarifications": [{"question": "Which quarter do you mean?", "suggestions": ["Q3 2025"]}],
}
CANNOT = {"action": "cannot_answer", "missingData": ["sales by quarter"]}


@pytest.fixture
def script(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "llm-script.json"
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(path)}
    path.write_text(json.dumps({"responses": {"planner": [json.dumps(CLARIFY), json.dumps(CANNOT)]}}))
    return path


@pytest.fixture
def ontology(owner):
    toolset_set_enabled(tenant=owner.tenant, toolset="data_agent", enabled=True, registry=default_registry())
    LanguageModelFactory(tenant=owner.tenant, is_default=True, api_key="sk-test-never-shown-0123456789")
    ontology = OntologyFactory(data_source__tenant=owner.tenant)
    DatasetFactory(ontology=ontology, name="orders")
    return ontology


def test_ask_question_runs_as_a_task_with_a_clarification_round(owner, ontology, script):
    me = identity_of(owner)
    task = start(me, "ask_question", {"ontologyId": str(ontology.pk), "question": "Sales last quarter?"})
    waiting = run_and_get(me, task)
    assert waiting.status == "input_required", waiting
    form = (waiting.input_requests or {})[CLARIFY_INPUT]["params"]
    assert form["requestedSchema"]["properties"]["answer1"]["title"] == "Which quarter do you mean?"
    assert Job.objects.get(pk=task.task_id).context["request_state"]

    tool_task_update(
        identity=me,
        task_id=task.task_id,
        input_responses={CLARIFY_INPUT: {"action": "accept", "content": {"answer1": "Q3 2025"}}},
    )
    done = run_and_get(me, task)
    assert done.status == "completed", done
    assert done.result is not None
    assert done.result["structuredContent"]["status"] == "cannot_answer"
    assert done.result["structuredContent"]["missingDatasets"] == ["sales by quarter"]
    assert tool_task_get(identity=me, task_id=task.task_id).poll_interval_ms is None


def test_ask_question_declares_optional_task_support():
    spec = default_registry().get("ask_question")
    assert spec is not None
    assert spec.task_support == "optional"

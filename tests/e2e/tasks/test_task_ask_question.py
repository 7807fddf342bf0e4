"""``ask_question`` as a task of the 2026-07-28 tasks extension, end to end: started on one Daphne
process, run by a ``jobs_worker`` on acme's sample database with the model scripted (litellm's
``mock_response``), and followed to its answer on another process sharing the database. The
processes are the session's gateway servers and their worker, whose script the test writes first."""

from __future__ import annotations

import httpx
import pytest

from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from tests.e2e.data_agent.test_ask_question import (
    CAVEAT,
    CHART,
    PLAN,
    REVENUE_BY_REGION,
    ROUTE,
    _direct,
    _script_writer,
)
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import access_token
from tests.e2e.tasks.test_task_extension_http import Client
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_model(committed) -> None:
    from accounts.models import Tenant

    committed(
        LanguageModelFactory,
        tenant=Tenant.objects.get(slug="acme"),
        name="Scripted",
        model="openai/gpt-4o-mini",
        is_default=True,
    )


@pytest.fixture
def acme_sales(demo) -> Ontology:
    return Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)


@pytest.fixture
def expected(acme_sales) -> list[list]:
    return _direct(acme_sales, REVENUE_BY_REGION)


async def test_a_task_started_on_one_process_is_answered_on_another(
    gateway_server, second_gateway_server, gateway_jobs_worker, acme_model, acme_sales, expected, script_path
):
    _script_writer(script_path)(
        planner=PLAN,
        navigator=ROUTE,
        sql_builder={"sql": REVENUE_BY_REGION, "explanation": "Line totals per region."},
        verifier={"ok": True, "caveats": [CAVEAT]},
        explainer={"narrative": "Sales by region.", "chart": CHART},
    )
    token = await access_token(
        gateway_server, Person("alice"), scope="mcp:read ontologies:read data_agent:write"
    )
    async with httpx.AsyncClient(timeout=30) as http:
        here = Client(http, gateway_server.mcp_url, token)
        there = Client(http, second_gateway_server.mcp_url, token)
        created = await here.result(
            "tools/call",
            {
                "name": "ask_question",
                "arguments": {"ontologyId": str(acme_sales.pk), "question": "Sales by region?"},
            },
        )
        assert created["resultType"] == "task"
        task = await there.settled(created["taskId"])
    assert task["status"] == "completed", task
    answer = task["result"]["structuredContent"]
    assert answer["status"] == "answered"
    assert answer["rows"] == expected
    assert answer["caveats"] == [CAVEAT]

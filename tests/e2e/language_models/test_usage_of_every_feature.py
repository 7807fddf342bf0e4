"""Every model call of a scripted session (one of each feature that needs a model) appears once in
usage, with tokens and cost, and ``GET /api/v1/usage`` answers totals equal to the sum of those
records: the official SDK client and the REST API against Daphne, a person of acme answering from
one script. The module is alone in acme's usage: the demo is put back for each module, so the
records the test reads are exactly the session's."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from decimal import Decimal

import pytest

from accounts.models import Role, Tenant
from core.models import AuditAction, AuditEvent, AuditOutcome
from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from language_models.models import LlmUsage, UsageOutcome
from tests.e2e.conftest import person_of
from tests.e2e.llm_gateway_support import INVOKE, api_client, api_token, invoke_body
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.factories import LanguageModelFactory, MembershipFactory

pytestmark = pytest.mark.django_db

USAGE = "/api/v1/usage"
SQL = (
    "SELECT r.name AS region, count(*) AS customers"
    " FROM customers c JOIN regions r ON r.id = c.region_id GROUP BY r.name"
)
PLAN = {"action": "answer", "restatedQuestion": "Customers per region", "assumptions": []}
ROUTE = {
    "datasets": ["customers", "regions"],
    "joins": [{"left": "customers.region_id", "right": "regions.id"}],
}
# Each feature's answers, under the purpose its calls name; how many calls each makes.
ANSWERS = {
    "planner": json.dumps(
        {"action": "answer", "restatedQuestion": "Customers per region", "assumptions": []}
    ),
    "navigator": json.dumps(
        {
            "datasets": ["customers", "regions"],
            "joins": [{"left": "customers.region_id", "right": "regions.id"}],
        }
    ),
    "sql_builder": json.dumps({"sql": SQL, "explanation": "Customers counted per region."}),
    "verifier": json.dumps({"ok": True, "caveats": []}),
    "explainer": json.dumps({"narrative": "Customers per region.", "chart": None}),
    "workflow_agent": [
        {"toolCalls": [{"name": "orders__OrdersByStatus", "arguments": {}}]},
        "Orders are mostly delivered.",
    ],
    "workflow_assistant": json.dumps({"command": "orders/OrdersByStatus", "parameters": {}}),
    "conversation_summary": json.dumps({"topic": "Orders", "summary": "Looked at the orders by status."}),
    "gateway": "Gatehouse is an MCP gateway.",
}
CALLS = {"ask_question": 5, "invoke_agent": 2, "invoke_assistant": 1, "summary": 1, "llm_invoke": 1, "api": 1}


@pytest.fixture
def member(committed, demo):
    """An admin of acme (every scope its role allows), with acme's scripted default model."""
    acme = Tenant.objects.get(slug="acme")
    membership = committed(MembershipFactory, tenant=acme, role=Role.ADMIN)
    committed(LanguageModelFactory, tenant=acme, name="Scripted", model="openai/gpt-4o-mini", is_default=True)
    return membership


def _answered(result) -> dict:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_every_call_of_a_session_is_in_usage_and_the_totals_are_their_sum(
    gateway_server, script_path, committed, member, tenant_toolset
):
    tenant_toolset("acme", "llm_gateway", enabled=True)
    script_path.write_text(json.dumps({"responses": ANSWERS}))
    ontology = await Ontology.objects.aget(tenant__slug="acme", name=ONTOLOGY_NAME)
    async with minted_sdk_client(committed, gateway_server, person_of(member)) as (client, _):
        asked = _answered(
            await client.call_tool("ask_question", {"ontologyId": str(ontology.pk), "question": "Customers?"})
        )
        assert asked["status"] == "answered", asked
        await client.call_tool("initialize", {})
        assert _answered(await client.call_tool("invoke_agent", {"user_query": "Order statuses?"}))["success"]
        mapped = _answered(await client.call_tool("invoke_assistant", {"user_query": "how are the orders"}))
        assert mapped["command_name"] == "orders/OrdersByStatus", mapped
        assert _answered(await client.call_tool("new_conversation", {}))["summary_source"] == "model"
        assert _answered(await client.call_tool("llm_invoke", invoke_body()))["output"]
    token = api_token(
        committed, gateway_server, username=member.user.username, tenant="acme", scope="llm:invoke usage:read"
    )
    async with api_client(gateway_server, token) as http:
        assert (await http.post(INVOKE, json=invoke_body())).status_code == 200
        report = await http.get(USAGE)
        per_feature = {f: (await http.get(USAGE, params={"feature": f})).json()["total"] for f in CALLS}
    assert report.status_code == 200, report.text

    records = [r async for r in LlmUsage.objects.filter(tenant__slug="acme")]
    assert Counter(r.feature for r in records) == CALLS
    assert {r.user_id for r in records} == {member.user_id}
    assert {r.outcome for r in records} == {UsageOutcome.OK}
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in records), records
    assert all(r.cost is not None and r.cost > 0 for r in records), records
    # Once each: one audit row per call, naming its own record.
    audited = AuditEvent.objects.filter(action=AuditAction.MODEL_CALLED, user_id=member.user_id)
    named = [uuid.UUID(e.detail["usage"]) async for e in audited.filter(outcome=AuditOutcome.OK)]
    assert sorted(named) == sorted(r.id for r in records)

    total = report.json()["total"]
    assert total["calls"] == len(records) == sum(CALLS.values())
    assert total["prompt_tokens"] == sum(r.prompt_tokens for r in records)
    assert total["completion_tokens"] == sum(r.completion_tokens for r in records)
    assert total["total_tokens"] == sum(r.total_tokens for r in records)
    assert total["cost"] == pytest.approx(float(sum((r.cost or Decimal(0) for r in records), Decimal(0))))
    assert {row["feature"]: row["calls"] for row in report.json()["by_feature"]} == CALLS
    assert sum(row["calls"] for row in report.json()["by_day"]) == len(records)
    for feature, calls in CALLS.items():
        mine = [r for r in records if r.feature == feature]
        assert per_feature[feature]["calls"] == calls
        assert per_feature[feature]["total_tokens"] == sum(r.total_tokens for r in mine)

"""A spent budget refuses every feature that needs a model, with the same error, end to end: the
official SDK client and the REST API against Daphne, a person of acme whose own daily budget is
spent. Each refusal leaves one ``refused`` usage record naming its feature and one ``denied``
``model.called`` audit row (``language_models.governed``)."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from accounts.models import Role, Tenant
from core.models import AuditAction, AuditEvent, AuditOutcome
from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from language_models.models import LlmBudget, LlmUsage, UsageOutcome
from tests.e2e.conftest import person_of
from tests.e2e.llm_gateway_support import INVOKE, api_client, api_token, assert_error, invoke_body
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.factories import LanguageModelFactory, MembershipFactory

pytestmark = pytest.mark.django_db

SPENT = "The caller's daily language model budget is spent: 0 of 0 tokens. It resets at "


@pytest.fixture
def spender(committed, demo):
    """An admin of acme (every scope its role allows) whose own daily budget is 0 tokens, with
    acme's scripted default model: every model call of theirs is refused, nobody else's."""
    acme = Tenant.objects.get(slug="acme")
    membership = committed(MembershipFactory, tenant=acme, role=Role.ADMIN)
    committed(LanguageModelFactory, tenant=acme, name="Scripted", model="openai/gpt-4o-mini", is_default=True)
    committed(LlmBudget.objects.create, tenant=acme, user=membership.user, period="day", max_tokens=0)
    return membership


async def _refused(call) -> MCPError:
    with pytest.raises(MCPError) as refusal:
        await call
    error = refusal.value.error
    assert error.code == -32029, error
    assert error.message.startswith(SPENT), error
    assert error.data["budget"] == "person"
    assert error.data["retryAfterSeconds"] > 0
    return refusal.value


async def test_a_spent_budget_refuses_every_feature_with_the_same_error(
    gateway_server, committed, spender, tenant_toolset
):
    tenant_toolset("acme", "llm_gateway", enabled=True)
    ontology = await Ontology.objects.aget(tenant__slug="acme", name=ONTOLOGY_NAME)
    async with minted_sdk_client(committed, gateway_server, person_of(spender)) as (client, _):
        await _refused(
            client.call_tool(
                "ask_question", {"ontologyId": str(ontology.pk), "question": "Revenue by region?"}
            )
        )
        await client.call_tool("initialize", {})
        await _refused(client.call_tool("invoke_agent", {"user_query": "Nordic customers?"}))
        # Not in the command syntax: only the model could map it.
        await _refused(client.call_tool("invoke_assistant", {"user_query": "sing me a song"}))
        # A turn without a model, so that the conversation has something to summarise.
        ran = await client.call_tool("execute_command", {"command": "orders/OrdersByStatus"})
        assert not ran.is_error, ran.content
        await _refused(client.call_tool("new_conversation", {}))
        await _refused(client.call_tool("llm_invoke", invoke_body()))
    token = api_token(committed, gateway_server, username=spender.user.username, tenant="acme")
    async with api_client(gateway_server, token) as http:
        error = assert_error(await http.post(INVOKE, json=invoke_body()), status=429, code="budget_exceeded")
    assert error["message"].startswith(SPENT)

    records = LlmUsage.objects.filter(user_id=spender.user_id)
    assert sorted([record.feature async for record in records]) == sorted(
        ["ask_question", "invoke_agent", "invoke_assistant", "summary", "llm_invoke", "api"]
    )
    assert {record.outcome async for record in records} == {UsageOutcome.REFUSED}
    assert {record.total_tokens async for record in records} == {0}
    denied = AuditEvent.objects.filter(user_id=spender.user_id, action=AuditAction.MODEL_CALLED)
    assert await denied.filter(outcome=AuditOutcome.DENIED).acount() == 6

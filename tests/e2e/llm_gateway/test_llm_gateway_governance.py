"""The LLM gateway's governance through real HTTP against Daphne: a budget reached mid-day answers
429 ``budget_exceeded`` until the period turns; usage rows and Prometheus counters match the calls
made; and the ``llm_invoke`` MCP tool keeps the same contract (result, budgets, usage rows) over the
official SDK client."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from accounts.models import Role
from language_models.models import LlmBudget, LlmUsage
from tests.e2e.conftest import person_of
from tests.e2e.llm_gateway_support import (
    INVOKE,
    api_client,
    api_token,
    assert_error,
    invoke_body,
    own_tenant_admin,
    script,
)
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.factories import MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def own(committed):
    return own_tenant_admin(committed)


def _budget(**fields):
    return LlmBudget.objects.create(**fields)


async def test_a_budget_reached_mid_day_is_a_429_until_the_day_turns(
    gateway_server, script_path, committed, own
):
    script(script_path, "An answer.")
    token = api_token(committed, gateway_server, username=own.user.username, tenant=own.tenant.slug)
    async with api_client(gateway_server, token) as http:
        first = await http.post(INVOKE, json=invoke_body())
        assert first.status_code == 200, first.text
        spent = first.json()["usage"]["total_tokens"]
        committed(_budget, tenant=own.tenant, period="day", max_tokens=spent + 1)

        second = await http.post(INVOKE, json=invoke_body())
        assert second.status_code == 200, second.text
        refused = await http.post(INVOKE, json=invoke_body())

        error = assert_error(refused, status=429, code="budget_exceeded")
        tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        assert datetime.fromisoformat(error["details"]["resetsAt"].replace("Z", "+00:00")) == tomorrow
        wait = int(refused.headers["Retry-After"])
        assert 0 < wait <= 86400
        assert abs((datetime.now(UTC) + timedelta(seconds=wait)) - tomorrow) < timedelta(minutes=2)

        # The day turns: what was spent now belongs to yesterday.
        await LlmUsage.objects.filter(tenant=own.tenant).aupdate(
            created=datetime.now(UTC) - timedelta(days=1)
        )
        again = await http.post(INVOKE, json=invoke_body())

    assert again.status_code == 200, again.text
    outcomes = [row.outcome async for row in LlmUsage.objects.filter(tenant=own.tenant).order_by("created")]
    assert sorted(outcomes) == ["ok", "ok", "ok", "refused"]


async def test_a_persons_budget_stops_that_person_only(gateway_server, script_path, committed, own):
    script(script_path, "An answer.")
    colleague = committed(MembershipFactory, tenant=own.tenant, role=Role.CONTRIBUTOR)
    committed(_budget, tenant=own.tenant, user=own.user, period="month", max_cost="0")
    mine = api_token(committed, gateway_server, username=own.user.username, tenant=own.tenant.slug)
    theirs = api_token(committed, gateway_server, username=colleague.user.username, tenant=own.tenant.slug)

    async with api_client(gateway_server, mine) as http:
        refused = await http.post(INVOKE, json=invoke_body())
    async with api_client(gateway_server, theirs) as http:
        allowed = await http.post(INVOKE, json=invoke_body())

    error = assert_error(refused, status=429, code="budget_exceeded")
    assert error["details"]["period"] == "month"
    assert allowed.status_code == 200, allowed.text


async def _counter(server, name: str, labels: dict[str, str]) -> float:
    async with api_client(server) as http:
        text = (await http.get("/metrics")).text
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_usage_rows_and_metrics_match_the_calls_made(gateway_server, script_path, committed, own):
    script(script_path, "An answer.")
    token = api_token(committed, gateway_server, username=own.user.username, tenant=own.tenant.slug)
    labels = {"tenant": own.tenant.slug, "provider": "openai", "channel": "api"}
    before = await _counter(gateway_server, "gatehouse_llm_gateway_calls_total", labels)

    async with api_client(gateway_server, token) as http:
        for _ in range(3):
            assert (await http.post(INVOKE, json=invoke_body())).status_code == 200
        script(script_path, {"error": "APIError"})
        assert (await http.post(INVOKE, json=invoke_body())).status_code == 502

    rows = [row async for row in LlmUsage.objects.filter(tenant=own.tenant)]
    assert sorted(row.outcome for row in rows) == ["error", "ok", "ok", "ok"]
    assert all(
        row.channel == "api" and row.provider == "openai" and row.user_id == own.user_id for row in rows
    )
    after = await _counter(gateway_server, "gatehouse_llm_gateway_calls_total", labels)
    assert after - before == 4


async def test_the_mcp_tool_keeps_the_same_contract(
    gateway_server, script_path, committed, own, tenant_toolset
):
    tenant_toolset(own.tenant.slug, "llm_gateway", enabled=True)
    person = person_of(own)
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    script(script_path, json.dumps({"answer": 42}))

    async with minted_sdk_client(committed, gateway_server, person) as (client, _):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("llm_invoke", invoke_body(response_schema=schema, temperature=0))
        committed(_budget, tenant=own.tenant, period="day", max_tokens=1)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("llm_invoke", invoke_body())

    assert "llm_invoke" in tools
    assert tools["llm_invoke"].output_schema is not None
    assert not result.is_error, result.content
    assert result.structured_content["output"] == {"answer": 42}
    text = result.content[-1]
    assert isinstance(text, TextContent)
    assert json.loads(text.text) == result.structured_content
    assert refused.value.code == -32029
    assert refused.value.data["retryAfterSeconds"] > 0
    channels = [row.channel async for row in LlmUsage.objects.filter(tenant=own.tenant)]
    assert sorted(channels) == ["mcp", "mcp"]


async def test_the_mcp_tool_is_off_until_the_tenant_turns_it_on(gateway_server, committed, own):
    person = person_of(own)

    async with minted_sdk_client(committed, gateway_server, person) as (client, _):
        names = {tool.name for tool in (await client.list_tools()).tools}

    assert "llm_invoke" not in names

"""MCP tools bound into ``llm/invoke`` and ``llm_invoke``, against Daphne: litellm's
``mock_tool_calls`` scripts the model; the tools, the pipeline, the audit rows and the usage
records are real. A tool the model may not use is refused to it and not run; a tool's refusal
(invalid arguments) is told to it; a loop that never ends stops at ``max_rounds``; a budget spent
mid-loop refuses the next round; a viewer's token cannot bind a write tool."""

from __future__ import annotations

import pytest

from accounts.models import Tenant
from core.models import AuditAction, AuditEvent
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
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db

SCOPES = "llm:invoke mcp:read"


def _calls(*calls: tuple[str, dict | str]) -> dict:
    return {"toolCalls": [{"name": name, "arguments": arguments} for name, arguments in calls]}


def _token(committed, server, membership) -> str:
    return api_token(
        committed, server, username=membership.user.username, tenant=membership.tenant.slug, scope=SCOPES
    )


@pytest.fixture
def own(committed):
    return own_tenant_admin(committed)


async def _rows(request_id: str, action: AuditAction) -> list[AuditEvent]:
    return [e async for e in AuditEvent.objects.filter(request_id=request_id, action=action)]


async def test_a_two_round_tool_conversation_over_rest(gateway_server, script_path, committed, own):
    script(
        script_path,
        _calls(("whoami", {}), ("run_query", {"sql": "SELECT 1"})),
        _calls(("whoami", "{not json")),
        "You are the admin.",
    )
    token = api_token(
        committed, gateway_server, username=own.user.username, tenant=own.tenant.slug, scope=SCOPES
    )
    async with api_client(gateway_server, token) as http:
        response = await http.post(INVOKE, json=invoke_body(mcp={"tools": ["whoami"]}))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["output"] == "You are the admin."
    assert body["finish_reason"] == "answered"
    assert [(c["round"], c["name"], c["outcome"]) for c in body["tool_calls"]] == [
        (1, "whoami", "ok"),
        (1, "run_query", "refused"),  # not bound: told to the model, never run
        (2, "whoami", "error"),  # its arguments were not JSON: told to the model, not run
    ]
    request_id = response.headers["x-request-id"]
    [invocation] = await _rows(request_id, AuditAction.LLM_INVOKED)
    model_calls = await _rows(request_id, AuditAction.MODEL_CALLED)
    tool_calls = await _rows(request_id, AuditAction.TOOL_CALLED)
    assert len(model_calls) == 3
    assert [(e.target, e.outcome) for e in tool_calls] == [("whoami", "ok")]
    assert all(e.detail.get("via") == "llm/invoke" for e in tool_calls)
    assert not [e for e in tool_calls if e.target == "run_query"]
    assert invocation.outcome == "ok"
    records = [r async for r in LlmUsage.objects.filter(tenant=own.tenant)]
    assert len(records) == 3
    assert body["id"] in {r.id.hex for r in records}
    assert body["usage"]["total_tokens"] == sum(r.total_tokens for r in records)


async def test_a_loop_that_never_ends_stops_at_max_rounds(gateway_server, script_path, committed, own):
    script(script_path, _calls(("whoami", {})))
    token = api_token(
        committed, gateway_server, username=own.user.username, tenant=own.tenant.slug, scope=SCOPES
    )
    async with api_client(gateway_server, token) as http:
        response = await http.post(INVOKE, json=invoke_body(mcp={"tools": ["whoami"], "max_rounds": 3}))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["finish_reason"] == "max_rounds"
    assert len(body["tool_calls"]) == 2
    assert await LlmUsage.objects.filter(tenant=own.tenant).acount() == 3


async def test_a_budget_spent_mid_loop_refuses_the_next_round(gateway_server, script_path, committed, own):
    script(script_path, _calls(("whoami", {})), "Never reached.")
    committed(LlmBudget.objects.create, tenant=own.tenant, period="day", max_tokens=1)
    token = api_token(
        committed, gateway_server, username=own.user.username, tenant=own.tenant.slug, scope=SCOPES
    )
    async with api_client(gateway_server, token) as http:
        response = await http.post(INVOKE, json=invoke_body(mcp={"tools": ["whoami"]}))
    assert_error(response, status=429, code="budget_exceeded")
    outcomes = sorted([r.outcome async for r in LlmUsage.objects.filter(tenant=own.tenant)])
    assert outcomes == ["ok", "refused"]


async def test_a_token_without_the_write_scope_cannot_bind_a_write_tool(gateway_server, committed, own):
    token = api_token(
        committed, gateway_server, username=own.user.username, tenant=own.tenant.slug, scope=SCOPES
    )
    async with api_client(gateway_server, token) as http:
        for binding, field in (
            ({"tools": ["whoami", "execute_command"]}, "mcp.tools[1]"),
            ({"tools": ["llm_invoke"]}, "mcp.tools[0]"),
            ({"toolsets": ["no_such_toolset"]}, "mcp.toolsets[0]"),
            ({"tools": ["who\u202eami"]}, "mcp.tools[0]"),
        ):
            error = assert_error(
                await http.post(INVOKE, json=invoke_body(mcp=binding)), status=400, code="validation_error"
            )
            assert error["details"]["field"] == field, (binding, error)
        too_many = assert_error(
            await http.post(INVOKE, json=invoke_body(mcp={"tools": ["whoami"] * 33})),
            status=400,
            code="validation_error",
        )
    assert too_many["details"]["field"] == "mcp.tools"
    assert await LlmUsage.objects.filter(tenant=own.tenant).acount() == 0
    # A viewer's token, even one that asked for every scope: the role keeps neither the model nor
    # a write tool.
    bob = api_token(committed, gateway_server, username="bob", scope="llm:invoke mcp:read mcp:write")
    async with api_client(gateway_server, bob) as http:
        refused = await http.post(INVOKE, json=invoke_body(mcp={"tools": ["execute_command"]}))
    assert_error(refused, status=403, code="insufficient_scope")


async def test_the_mcp_tool_binds_tools_within_its_own_request(
    gateway_server, script_path, committed, own, tenant_toolset
):
    tenant_toolset(own.tenant.slug, "llm_gateway", enabled=True)
    script(script_path, _calls(("whoami", {})), "Done.")
    async with minted_sdk_client(committed, gateway_server, person_of(own)) as (client, _):
        result = await client.call_tool("llm_invoke", invoke_body(mcp={"tools": ["whoami"]}))
    assert not result.is_error, result.content
    assert result.structured_content["output"] == "Done."
    assert [(c["name"], c["outcome"]) for c in result.structured_content["tool_calls"]] == [("whoami", "ok")]
    [nested] = [
        e
        async for e in AuditEvent.objects.filter(
            tenant_id=own.tenant_id, action=AuditAction.TOOL_CALLED, target="whoami"
        )
    ]
    assert nested.detail.get("via") == "llm_invoke"


async def test_one_upstream_is_bound_alone_by_its_name(gateway_server, script_path, committed, own):
    """globex's demo upstream (bootstrap_demo registered it) bound as ``upstreams.demo``: its tools
    run, Gatehouse's own are not bound; a name no upstream of the caller's tenant has is refused."""
    globex = await Tenant.objects.aget(slug="globex")
    committed(
        LanguageModelFactory, tenant=globex, model="openai/gpt-4o-mini", api_key="sk-globex", is_default=True
    )
    script(script_path, _calls(("demo_word_count", {"text": "one two"}), ("whoami", {})), "Two words.")
    carol = api_token(committed, gateway_server, username="carol", tenant="globex", scope=SCOPES)
    async with api_client(gateway_server, carol) as http:
        response = await http.post(INVOKE, json=invoke_body(mcp={"toolsets": ["upstreams.demo"]}))
        unknown = await http.post(INVOKE, json=invoke_body(mcp={"toolsets": ["upstreams.nope"]}))
    async with api_client(gateway_server, _token(committed, gateway_server, own)) as http:
        elsewhere = await http.post(INVOKE, json=invoke_body(mcp={"toolsets": ["upstreams.demo"]}))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["output"] == "Two words."
    assert [(c["name"], c["outcome"]) for c in body["tool_calls"]] == [
        ("demo_word_count", "ok"),
        ("whoami", "refused"),
    ]
    [counted] = await _rows(response.headers["x-request-id"], AuditAction.TOOL_CALLED)
    assert (counted.target, counted.outcome) == ("demo_word_count", "ok")
    assert counted.detail.get("via") == "llm/invoke"
    for refused in (unknown, elsewhere):
        error = assert_error(refused, status=400, code="validation_error")
        assert error["details"]["field"] == "mcp.toolsets[0]"

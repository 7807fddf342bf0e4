"""One pipeline: a refusal added once, as a call policy of the pipeline, refuses a tool however it
is run: a client's own call over HTTP, a workflow command, a tool task's step, a model's tool call
in the LLM tool loop (``llm/invoke`` over REST and the ``llm_invoke`` tool over MCP). None of those
callers is touched by the test, and each refusal leaves its audit row; the model is told the
refusal, and the tool never runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.shared.exceptions import MCPError

from config.asgi import application
from core.errors import PermissionDenied
from core.identity import Identity
from core.models import AuditEvent
from mcp_gateway.kernel.identity_cache import identity_cache
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.models import TenantToolset
from mcp_gateway.pipeline.call_policies import call_policy_add
from mcp_gateway.pipeline.server import server_build
from mcp_gateway.pipeline.tool_runs import tool_call_run
from tests.support.factories import (
    AccessTokenFactory,
    LanguageModelFactory,
    MembershipFactory,
    UserFactory,
)
from tests.support.identity_cache_support import identity_cache_stop
from tests.support.tool_context import tool_context
from tests.support.workflow_support import identity_for, sample_with_workflow
from workflows.execution import command_resolve, command_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]

POLICY = "whoami is switched off by a policy of the pipeline."
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "policy-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def whoami_refused():
    """The new policy, added in one place: the pipeline's call policies, which the guard asks for
    every tool call."""

    async def whoami_off(*, identity: Identity, tool: str, arguments: Mapping[str, Any]) -> None:
        if tool == "whoami":
            raise PermissionDenied(POLICY)

    remove = call_policy_add(whoami_off)
    yield
    remove()


@pytest.fixture
def member(tenant):
    sample_with_workflow(tenant)
    return MembershipFactory(user=UserFactory(username="ada"), tenant=tenant, role="admin")


def _denied() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="permission.denied", target="whoami"))


async def _denied_rows() -> list[AuditEvent]:
    return await sync_to_async(_denied)()


@pytest.fixture
async def in_process_endpoint():
    """The deployed ASGI application, in this process: its identity cache starts listening on this
    test's loop with the first request, and stops with the test."""
    yield application
    await identity_cache_stop(identity_cache)


async def test_a_clients_own_call_over_http_is_refused(whoami_refused, member, in_process_endpoint):
    token = await sync_to_async(AccessTokenFactory)(
        membership=member, scope="mcp:read mcp:write", resource=[settings.MCP_RESOURCE_URL]
    )
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}, "_meta": META},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {token.token}",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "whoami",
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=in_process_endpoint), base_url=settings.PUBLIC_URL
    ) as client:
        response = await client.post(settings.MCP_PATH, json=body, headers=headers)
    assert response.json()["error"] == {"code": PermissionDenied.jsonrpc_code, "message": POLICY}
    [row] = await _denied_rows()
    assert "via" not in row.detail


def _whoami_then_answer(write_script) -> None:
    write_script({"gateway": [{"toolCalls": [{"name": "whoami", "arguments": {}}]}, "Told."]})


@pytest.fixture
def scripted_model(member):
    LanguageModelFactory(tenant=member.tenant, model="openai/gpt-4o-mini", api_key="sk-one-pipeline")


async def test_a_models_tool_call_over_rest_is_refused_and_told_to_it(
    whoami_refused,
    member,
    scripted_model,
    llm_script,
    in_process_endpoint,
):
    _whoami_then_answer(llm_script)
    token = await sync_to_async(AccessTokenFactory)(
        membership=member, scope="llm:invoke mcp:read", resource=[settings.API_RESOURCE_URL]
    )
    body = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Who am I?"}],
        "mcp": {"tools": ["whoami"]},
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=in_process_endpoint), base_url=settings.PUBLIC_URL
    ) as client:
        response = await client.post(
            f"{settings.API_PATH}/v1/llm/invoke",
            json=body,
            headers={"authorization": f"Bearer {token.token}"},
        )
    assert response.status_code == 200, response.text
    assert response.json()["tool_calls"] == [
        {"round": 1, "name": "whoami", "arguments": {}, "outcome": "refused", "message": POLICY}
    ]
    [row] = await _denied_rows()
    assert row.detail["via"] == "llm/invoke"


async def test_a_models_tool_call_within_llm_invoke_is_refused_and_told_to_it(
    whoami_refused,
    member,
    scripted_model,
    llm_script,
    in_process_endpoint,
):
    _whoami_then_answer(llm_script)
    await TenantToolset.objects.aupdate_or_create(
        tenant=member.tenant, toolset="llm_gateway", defaults={"enabled": True}
    )
    token = await sync_to_async(AccessTokenFactory)(
        membership=member, scope="llm:invoke mcp:read", resource=[settings.MCP_RESOURCE_URL]
    )
    arguments = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Who am I?"}],
        "mcp": {"tools": ["whoami"]},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 8,
        "method": "tools/call",
        "params": {"name": "llm_invoke", "arguments": arguments, "_meta": META},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {token.token}",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "llm_invoke",
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=in_process_endpoint), base_url=settings.PUBLIC_URL
    ) as client:
        response = await client.post(settings.MCP_PATH, json=body, headers=headers)
    result = response.json()["result"]
    assert not result.get("isError"), result
    assert result["structuredContent"]["tool_calls"] == [
        {"round": 1, "name": "whoami", "arguments": {}, "outcome": "refused", "message": POLICY}
    ]
    [row] = await _denied_rows()
    assert row.detail["via"] == "llm_invoke"


async def test_a_workflow_command_running_the_tool_is_refused(whoami_refused, member):
    identity = await sync_to_async(identity_for)(member)
    resolved = await sync_to_async(command_resolve)(
        text="customers/WhoAmI",
        tenant_id=identity.tenant_id,
        context="catalogue",
        granted=identity.scopes,
        enabled_toolsets=frozenset({"account", "data_agent"}),
    )
    with pytest.raises(MCPError) as refused:
        await command_run(
            resolved=resolved,
            ctx=tool_context(server=server_build(registry=default_registry()), identity=identity),
            identity=identity,
            context="catalogue",
            via="test",
        )
    assert (refused.value.error.code, refused.value.error.message) == (PermissionDenied.jsonrpc_code, POLICY)
    [row] = await _denied_rows()
    assert row.detail["via"] == "workflow:customers/WhoAmI"


async def test_a_tool_tasks_step_is_refused(whoami_refused, member):
    identity = await sync_to_async(identity_for)(member)
    answer = await tool_call_run(
        identity=identity, task_id="policy", tool="whoami", arguments={}, client_capabilities={}
    )
    assert answer.result is None
    assert answer.error == {"code": PermissionDenied.jsonrpc_code, "message": POLICY}
    [row] = await _denied_rows()
    assert row.detail["code"] == PermissionDenied.jsonrpc_code


async def test_without_the_policy_each_way_runs_the_tool(member):
    identity = await sync_to_async(identity_for)(member)
    answer = await tool_call_run(
        identity=identity, task_id="plain", tool="whoami", arguments={}, client_capabilities={}
    )
    assert answer.error is None
    assert answer.result is not None
    assert answer.result["structuredContent"]["user"]["username"] == "ada"


async def test_a_policy_sees_the_call_and_once_removed_refuses_nothing(member):
    identity = await sync_to_async(identity_for)(member)
    seen: list[tuple[str, dict[str, Any]]] = []

    async def watching(*, identity: Identity, tool: str, arguments: Mapping[str, Any]) -> None:
        seen.append((tool, dict(arguments)))
        raise PermissionDenied(POLICY)

    remove = call_policy_add(watching)
    try:
        refused = await tool_call_run(
            identity=identity, task_id="watched", tool="whoami", arguments={}, client_capabilities={}
        )
    finally:
        remove()
    remove()  # a second removal is harmless
    allowed = await tool_call_run(
        identity=identity, task_id="after", tool="whoami", arguments={}, client_capabilities={}
    )
    assert refused.error == {"code": PermissionDenied.jsonrpc_code, "message": POLICY}
    assert seen == [("whoami", {})]
    assert allowed.error is None

"""Running resolved commands on acme's real sample database: a query returns real rows, a tool runs
through the SDK server, built-ins move between contexts; each run is audited (a tool command twice:
the command and its tool), failures too."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError

from accounts.models import User
from core.errors import InsufficientScope, RateLimited, Unavailable
from core.models import AuditEvent, RateLimitScope
from data_agent.sample import FIRST_ORDER_DATE
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.pipeline.server import server_build
from tests.support.factories import MembershipFactory, RateLimitRuleFactory, UserFactory
from tests.support.tool_context import tool_context
from tests.support.workflow_support import EVERY_KIND, identity_for, sample_with_workflow
from workflows.execution import command_resolve, command_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]


ALL = frozenset({"account", "conformance", "data_agent"})
SESSION = "workflow-test-session"


@pytest.fixture
def demo(tenant):
    sample_with_workflow(tenant)
    return identity_for(MembershipFactory(user=UserFactory(username="ada"), tenant=tenant, role="admin"))


@pytest.fixture
def every_kind(tenant):
    sample_with_workflow(tenant, EVERY_KIND)
    return identity_for(MembershipFactory(user=UserFactory(username="ada"), tenant=tenant, role="admin"))


@pytest.fixture
def viewer(tenant):
    return identity_for(MembershipFactory(user=UserFactory(username="vic"), tenant=tenant, role="viewer"))


@pytest.fixture(scope="module")
def server():
    return server_build(registry=default_registry())


def context_for(server, identity) -> Context:
    return tool_context(server=server, identity=identity, session_id=SESSION)


async def run(server, identity, text, *, context="catalogue", runner=None, via="execute_command"):
    resolved = await sync_to_async(command_resolve)(
        text=text,
        tenant_id=identity.tenant_id,
        context=context,
        granted=identity.scopes,
        enabled_toolsets=ALL,
    )
    return await command_run(
        resolved=resolved,
        ctx=context_for(server, runner or identity),
        identity=runner or identity,
        context=context,
        via=via,
    )


@sync_to_async
def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("created"))


async def test_a_query_command_returns_real_rows_and_is_audited(server, demo):
    result = await run(server, demo, "catalogue/ListProducts <category>rockets</category>")
    assert result.success
    assert result.context_after == "catalogue"
    assert result.parameters == {"category": "rockets"}
    artifacts = result.response.artifacts
    assert artifacts["columns"] == ["name", "unit_price"]
    assert artifacts["rowCount"] == 5
    assert len(artifacts["rows"]) == 5
    assert {row[0] for row in artifacts["rows"]} >= {"Rocket Skates", "Rocket Sled"}
    assert "%(category)s" in artifacts["sql"]
    assert "rockets" not in artifacts["sql"]
    assert artifacts["lineage"]["_type"] == "data_lineage"
    assert result.response.response.startswith("5 rows (name, unit_price) from products")
    [event] = await events("workflow.command")
    assert (event.target, event.outcome, event.session_id) == ("catalogue/ListProducts", "ok", SESSION)
    assert event.user_id == demo.user_id
    assert event.tenant_id == demo.tenant_id
    assert event.detail["via"] == "execute_command"
    assert event.detail["parameters"] == {"category": "rockets"}
    assert event.detail["success"] is True
    assert event.detail["rowCount"] == 5
    assert event.detail["sql"] == artifacts["sql"]
    assert await events("tool.called") == []


async def test_dates_integers_and_defaults_are_bound(server, demo):
    since = (FIRST_ORDER_DATE - timedelta(days=100)).isoformat()
    result = await run(server, demo, f"customers/NewCustomersSince <since>{since}</since>", context="orders")
    assert result.parameters == {"since": since}
    assert 0 < result.response.artifacts["rowCount"] < 400
    assert all(row[2] >= since for row in result.response.artifacts["rows"])
    # Running a command of another context moves the session there.
    assert result.context_after == "customers"
    best = await run(server, demo, "catalogue/BestSellers")
    assert best.parameters == {"limit": 10}
    assert best.response.artifacts["rowCount"] == 10
    five = await run(server, demo, "catalogue/BestSellers <limit>5</limit>")
    assert five.response.artifacts["rowCount"] == 5


async def test_a_literal_percent_and_every_type_bind_on_postgres(server, every_kind):
    result = await run(
        server,
        every_kind,
        "shop/Products <category>rockets</category> <prefix>Rocket</prefix>",
        context="shop",
    )
    assert [row[0] for row in result.response.artifacts["rows"]] == [
        "Rocket Skates",
        "Rocket Sled",
        "Rocket Wagon",
    ]
    typed = await run(
        server, every_kind, "shop/Typed <n>42</n><x>2.5</x><b>true</b><d>2025-02-28</d>", context="shop"
    )
    assert typed.response.artifacts["rows"] == [[42, 2.5, True, "2025-02-28"]]
    assert typed.parameters == {"n": 42, "x": 2.5, "b": True, "d": "2025-02-28"}


@pytest.mark.parametrize("value", ["'; DROP TABLE products; --", "x" * 3000, "%(category)s %s"])
async def test_hostile_values_are_bound_not_pasted(server, demo, value):
    result = await run(server, demo, f"catalogue/ListProducts <category>{value}</category>")
    assert result.success
    assert result.response.artifacts["rowCount"] == 0
    again = await run(server, demo, "catalogue/ListCategories")
    assert again.response.artifacts["rowCount"] == 5


async def test_a_tool_command_runs_the_tool_and_both_are_audited(server, demo):
    result = await run(server, demo, "customers/WhoAmI", context="customers", via="invoke_agent")
    assert result.success
    assert result.response.artifacts["user"]["username"] == "ada"
    assert result.response.artifacts["tenant"]["slug"] == demo.tenant_slug
    assert "ada" in result.response.response
    [command] = await events("workflow.command")
    assert (command.target, command.outcome) == ("customers/WhoAmI", "ok")
    assert command.detail["via"] == "invoke_agent"
    assert command.detail["tool"] == "whoami"
    [tool] = await events("tool.called")
    assert (tool.target, tool.outcome, tool.session_id) == ("whoami", "ok", SESSION)
    assert tool.detail["via"] == "workflow:customers/WhoAmI"
    assert tool.detail["arguments"] == {}


async def test_tool_arguments_come_from_the_commands_parameters(server, every_kind):
    result = await run(server, every_kind, "shop/Rename <display_name>Ada L.</display_name>", context="shop")
    assert result.success
    user = await sync_to_async(User.objects.get)(pk=every_kind.user_id)
    assert user.first_name == "Ada L." or "Ada L." in str(result.response.artifacts)
    [tool] = await events("tool.called")
    assert tool.detail["arguments"] == {"display_name": "Ada L."}


async def test_arguments_the_tool_refuses_are_a_failed_command_not_an_error(server, every_kind):
    result = await run(server, every_kind, "shop/Rename <display_name>   </display_name>", context="shop")
    assert not result.success
    assert result.response.response
    [command] = await events("workflow.command")
    assert command.outcome == "error"
    assert command.detail["success"] is False
    [tool] = await events("tool.called")
    assert tool.outcome == "error"
    # Refused by the pipeline's argument check before the tool ran, as a client's own call is.
    assert tool.detail["code"] == -32602


async def test_a_refused_tool_is_audited_twice_and_raised(server, viewer, demo):
    without_read = dataclasses.replace(viewer, scopes=viewer.scopes - {"mcp:read"})
    # The pipeline's refusal, in the JSON-RPC terms a client's own call of the tool gets.
    with pytest.raises(MCPError) as refused:
        await run(server, demo, "customers/WhoAmI", runner=without_read)
    assert refused.value.error.code == InsufficientScope.jsonrpc_code
    [command] = await events("workflow.command")
    assert command.outcome == "denied"
    assert command.detail["code"] == -32001
    [denied] = await events("permission.denied")
    assert denied.target == "whoami"
    assert denied.detail["via"] == "workflow:customers/WhoAmI"


@pytest.fixture
def whoami_refused(db):
    return RateLimitRuleFactory.create(scope=RateLimitScope.TOOL, target="whoami", limit=0)


async def test_a_tool_command_spends_the_tools_own_rate_limit(server, demo, whoami_refused):
    with pytest.raises(MCPError) as refused:
        await run(server, demo, "customers/WhoAmI")
    assert refused.value.error.code == RateLimited.jsonrpc_code
    [command] = await events("workflow.command")
    assert command.outcome == "denied"
    assert command.detail["code"] == -32029
    [limited] = await events("rate.limited")
    assert limited.target == "whoami"
    assert limited.detail["via"] == "workflow:customers/WhoAmI"
    assert await events("tool.called") == []


async def test_a_failing_query_is_audited_with_its_code_and_raised(server, demo, tmp_path):
    resolved = await sync_to_async(command_resolve)(
        text="catalogue/ListCategories",
        tenant_id=demo.tenant_id,
        context="catalogue",
        granted=demo.scopes,
        enabled_toolsets=ALL,
    )
    assert resolved.source is not None
    gone = dataclasses.replace(resolved.source, kind="sqlite", url=f"sqlite:///{tmp_path}/missing.sqlite3")
    with pytest.raises(Unavailable):
        await command_run(
            resolved=dataclasses.replace(resolved, source=gone),
            ctx=context_for(server, demo),
            identity=demo,
            context="catalogue",
            via="execute_command",
        )
    [event] = await events("workflow.command")
    assert (event.outcome, event.detail["code"], event.detail["success"]) == ("error", -32005, False)


async def test_built_ins_answer_and_move_between_contexts(server, demo):
    where = await run(server, demo, "orders/WhereAmI", context="catalogue")
    assert where.context_after == "orders"
    assert where.response.response.startswith("You are in the orders context")
    go = await run(server, demo, "orders/GoTo <context>customers</context>", context="orders")
    assert go.context_after == "customers"
    assert go.response.artifacts == {
        "context": "customers",
        "description": "The companies that buy from Acme, by region and segment.",
        "previous": "orders",
    }
    builtin_go = await run(
        server, demo, "catalogue/go_to_context <context>orders</context>", context="customers"
    )
    assert builtin_go.context_after == "orders"
    listing = await run(server, demo, "customers/list_commands", context="customers")
    names = [c["name"] for c in listing.response.artifacts["commands"]]
    assert names[:4] == [
        "customers/CustomersInRegion",
        "customers/CustomersBySegment",
        "customers/NewCustomersSince",
        "customers/WhoAmI",
    ]
    assert names[-1] == "customers/list_commands"
    assert "customers/CustomersInRegion <region>string</region>" in listing.response.response
    current = await run(server, demo, "catalogue/what_is_current_context", context="orders")
    assert current.context_after == "catalogue"
    assert "catalogue" in current.response.response
    assert len(await events("workflow.command")) == 5


async def test_a_viewer_lists_only_what_it_may_run(server, viewer, demo):
    listing = await run(server, viewer, "customers/list_commands", context="customers")
    assert [c["name"] for c in listing.response.artifacts["commands"]] == [
        "customers/WhoAmI",
        "customers/what_is_current_context",
        "customers/go_to_context",
        "customers/list_commands",
    ]

"""The workflows toolset as a client uses it: the official SDK client against Daphne on PostgreSQL,
on acme's demo "Sales analyst" workflow over the sample database (``bootstrap_demo`` imports it).

The agent's model is scripted through litellm's own ``mock_response``/``mock_tool_calls`` (the
server reads ``LLM_MOCK_RESPONSES_FILE``); the commands, queries and rows are real. The servers are
the session's gateway servers, whose script each test writes before its calls.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from accounts.models import Tenant
from conversations.models import Conversation, SessionBinding, Turn
from core.models import AuditAction
from data_agent.executor import json_safe
from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from data_agent.selectors import data_source_url
from tests.e2e.conftest import _serve
from tests.e2e.harness import Person, sdk_client
from tests.e2e.oauth_driver import access_token
from tests.e2e.raw_mcp import RawMcp, sse_messages
from tests.e2e.stamping import StampingTransport, audit_events
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db

NORDICS = (
    "SELECT c.name, c.segment, c.signup_date FROM customers c JOIN regions r ON r.id = c.region_id"
    " WHERE r.name = 'Nordics' ORDER BY c.name"
)


@pytest.fixture
def script(script_path):
    def write(*, delays: dict[str, float] | None = None, **responses: Any) -> None:
        script_path.write_text(json.dumps({"responses": responses, "delaySeconds": delays or {}}))

    return write


@pytest.fixture
def acme_model(committed) -> None:
    committed(
        LanguageModelFactory,
        tenant=Tenant.objects.get(slug="acme"),
        name="Scripted",
        model="openai/gpt-4o-mini",
        is_default=True,
    )


@pytest.fixture
def nordics(demo) -> list[list[Any]]:
    """The Nordic customers, read straight from acme's sample database."""
    ontology = Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)
    with psycopg.connect(data_source_url(data_source=ontology.data_source)) as conn:
        return [[json_safe(v) for v in row] for row in conn.execute(NORDICS).fetchall()]


def _structured(result) -> dict[str, Any]:
    assert not result.is_error, result
    structured = result.structured_content
    assert structured is not None
    # The same JSON as text, in the last block.
    assert json.loads(result.content[-1].text) == structured
    return structured


async def _error(call) -> MCPError:
    with pytest.raises(MCPError) as refusal:
        await call
    return refusal.value


async def _turns(conversation_id: str, *, after: int = 0) -> list[Turn]:
    """The conversation's turns, leaving out the first ``after`` (a person's conversation goes on
    from test to test, as it would from session to session)."""
    turns = [t async for t in Turn.objects.filter(conversation_id=conversation_id).order_by("created", "id")]
    return turns[after:]


async def _started(client) -> tuple[str, int]:
    """``initialize``, then the conversation's id and how many turns it already has."""
    conversation_id = _structured(await client.call_tool("initialize", {}))["conversation_id"]
    return conversation_id, len(await _turns(conversation_id))


# --- initialize, info, commands ---------------------------------------------------------------


async def test_initialize_with_and_without_user_id(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        first = _structured(await client.call_tool("initialize", {}))
        whoami = _structured(await client.call_tool("whoami", {}))
        again = _structured(
            await client.call_tool(
                "initialize", {"user_id": whoami["user"]["id"], "conversation_id": first["conversation_id"]}
            )
        )
        refused = await _error(client.call_tool("initialize", {"user_id": whoami["user"]["id"] + 1000}))
    info = first["workflow_info"]
    assert info["workflow_name"] == "Sales analyst"
    assert info["available_contexts"] == ["catalogue", "customers", "orders"]
    assert again["conversation_id"] == first["conversation_id"]
    assert refused.error.code == -32001
    assert "one person" in refused.error.message


async def test_initialize_takes_a_fastworkflow_clients_string_user_id_naming_the_caller(gateway_server):
    """FastWorkflow clients send user_id as a string ("default_user" unless their person gave one):
    the caller's username, id as digits, or that default name the caller; anyone else is refused."""
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        whoami = _structured(await client.call_tool("whoami", {}))
        accepted = [
            _structured(await client.call_tool("initialize", {"user_id": user_id}))["conversation_id"]
            for user_id in ("default_user", "alice", str(whoami["user"]["id"]))
        ]
        refusals = [
            await _error(client.call_tool("initialize", {"user_id": user_id}))
            for user_id in (
                "bob",
                "alice\u200b",
                "\u0661",
                "alice\x00",
                " alice",
                str(whoami["user"]["id"] + 1000),
            )
        ]
        too_long = await _error(client.call_tool("initialize", {"user_id": "a" * 151}))
    assert len(set(accepted)) == 1
    assert [refused.error.code for refused in refusals] == [-32001] * 6
    assert too_long.error.code == -32602


async def test_a_new_session_continues_the_last_conversation(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        first = _structured(await client.call_tool("initialize", {}))
        await client.call_tool("execute_command", {"command": "orders/OrdersByStatus"})
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        second = _structured(await client.call_tool("initialize", {}))
    assert second["conversation_id"] == first["conversation_id"]


async def test_tools_before_initialize_say_to_call_it(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        errors = [
            await _error(client.call_tool(name, arguments))
            for name, arguments in [
                ("get_workflow_info", {}),
                ("get_commands", {}),
                ("execute_command", {"command": "orders/OrdersByStatus"}),
                ("list_conversations", {}),
                ("post_feedback", {"nl_feedback": "good"}),
            ]
        ]
    assert {e.error.code for e in errors} == {-32002}
    assert all("initialize" in e.error.message for e in errors)


async def test_get_workflow_info_has_no_current_context(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        await client.call_tool("initialize", {})
        info = _structured(await client.call_tool("get_workflow_info", {}))
    assert set(info) == {"workflow_name", "description", "purpose", "available_contexts"}


async def test_get_commands_has_the_structured_and_the_display_form(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        await client.call_tool("initialize", {})
        answer = _structured(await client.call_tool("get_commands", {}))
    names = [c["name"] for c in answer["commands"]]
    assert "catalogue/ListProducts" in names
    assert {"catalogue/what_is_current_context", "catalogue/go_to_context", "catalogue/list_commands"} <= set(
        names
    )
    [products] = [c for c in answer["commands"] if c["name"] == "catalogue/ListProducts"]
    assert products["parameters"] == [
        {
            "name": "category",
            "type": "string",
            "required": True,
            "description": products["parameters"][0]["description"],
        }
    ]
    assert "catalogue/ListProducts <category>rockets</category>" in products["examples"]
    assert "catalogue/ListProducts" in answer["display_text"]


# --- execute_command --------------------------------------------------------------------------


async def test_execute_command_returns_real_rows_and_is_a_turn(gateway_server, nordics):
    expected = nordics
    assert expected
    transport = StampingTransport()
    async with sdk_client(gateway_server, Person("alice"), transport=transport) as (client, _):
        conversation_id, before = await _started(client)
        output = _structured(
            await client.call_tool(
                "execute_command", {"command": "customers/CustomersInRegion <region>Nordics</region>"}
            )
        )
    assert output["success"] is True
    assert output["workflow_name"] == "Sales analyst"
    assert output["context"] == "customers"
    assert output["command_name"] == "customers/CustomersInRegion"
    assert output["command_parameters"] == {"region": "Nordics"}
    [response] = output["command_responses"]
    assert response["artifacts"]["rows"] == expected
    assert [t["direction"] for t in output["traces"]] == ["agent_to_workflow", "workflow_to_agent"]
    [turn] = await _turns(conversation_id, after=before)
    assert (turn.kind, turn.success, turn.request) == (
        "command",
        True,
        "customers/CustomersInRegion <region>Nordics</region>",
    )
    # The turn's own call and the command it ran are both audited.
    call_ids = transport.request_ids("tools/call")
    events = [e for request_id in call_ids for e in await audit_events(request_id)]
    actions = {(e.action, e.target) for e in events}
    assert (AuditAction.TOOL_CALLED, "execute_command") in actions
    assert (AuditAction.WORKFLOW_COMMAND, "customers/CustomersInRegion") in actions


async def test_a_tool_command_audits_the_command_and_its_tool(gateway_server):
    transport = StampingTransport()
    async with sdk_client(gateway_server, Person("alice"), transport=transport) as (client, _):
        await client.call_tool("initialize", {})
        output = _structured(await client.call_tool("execute_command", {"command": "customers/WhoAmI"}))
    assert output["success"] is True
    assert output["command_responses"][0]["artifacts"]["user"]["username"] == "alice"
    request_id = transport.request_ids("tools/call")[-1]
    events = {(e.action, e.target) for e in await audit_events(request_id)}
    assert {
        (AuditAction.TOOL_CALLED, "execute_command"),
        (AuditAction.WORKFLOW_COMMAND, "customers/WhoAmI"),
        (AuditAction.TOOL_CALLED, "whoami"),
    } <= events


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("not a command", "malformed"),
        ("customers/NoSuchThing", "unknown_command"),
        ("customers/CustomersInRegion", "missing_parameter"),
        ("catalogue/ProductsUnderPrice <max_price>cheap</max_price>", "invalid_value"),
        ("customers/CustomersInRegion <region>x</region> <colour>red</colour>", "unknown_parameter"),
        ("customers/CustomersInRegion <region>\x00</region>", None),
    ],
)
async def test_a_bad_command_is_a_helpful_invalid_params(gateway_server, command, problem):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        conversation_id, before = await _started(client)
        refusal = await _error(client.call_tool("execute_command", {"command": command}))
    assert refusal.error.code == -32602, refusal.error
    if problem is not None:
        assert refusal.error.data["problem"] == problem
        assert refusal.error.data["expected"]
    assert await _turns(conversation_id, after=before) == []


# --- invoke_assistant -------------------------------------------------------------------------


async def test_invoke_assistant_runs_one_command_without_a_model(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        await client.call_tool("initialize", {})
        exact = _structured(
            await client.call_tool("invoke_assistant", {"user_query": "/orders/OrdersByStatus"})
        )
        unmapped = _structured(await client.call_tool("invoke_assistant", {"user_query": "sing me a song"}))
    assert exact["success"] is True
    assert exact["command_name"] == "orders/OrdersByStatus"
    assert exact["command_responses"][0]["artifacts"]["rows"]
    assert unmapped["success"] is False
    assert unmapped["command_name"] == ""
    assert "could not be mapped" in unmapped["command_responses"][0]["response"]


# --- invoke_agent -----------------------------------------------------------------------------

TWO_STEPS = [
    {"toolCalls": [{"name": "customers__CustomersInRegion", "arguments": {"region": "Nordics"}}]},
    {"toolCalls": [{"name": "orders__OrdersByStatus", "arguments": {}}]},
    "The Nordics have these customers, and orders are mostly delivered.",
]


async def test_invoke_agent_attaches_traces_without_a_progress_token(gateway_server, acme_model, script):
    script(workflow_agent=TWO_STEPS)
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        conversation_id, before = await _started(client)
        output = _structured(
            await client.call_tool("invoke_agent", {"user_query": "Nordic customers and order status?"})
        )
    assert output["success"] is True
    assert set(output) == {
        "success",
        "workflow_name",
        "context",
        "command_name",
        "command_parameters",
        "command_responses",
        "traces",
    }
    traces = output["traces"]
    assert [(t["direction"], t["command_name"]) for t in traces] == [
        ("agent_to_workflow", "customers/CustomersInRegion"),
        ("workflow_to_agent", "customers/CustomersInRegion"),
        ("agent_to_workflow", "orders/OrdersByStatus"),
        ("workflow_to_agent", "orders/OrdersByStatus"),
    ]
    assert traces[0]["parameters"] == {"region": "Nordics"}
    assert all(t["success"] for t in traces)
    assert output["command_responses"][-1]["response"].startswith("The Nordics have")
    [turn] = await _turns(conversation_id, after=before)
    assert turn.kind == "agent"
    assert len(turn.traces) == 4


async def test_invoke_agent_streams_traces_with_a_progress_token(gateway_server, acme_model, script):
    script(workflow_agent=TWO_STEPS)
    messages: list[str | None] = []
    logged: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async def on_log(params) -> None:
        logged.append(params.data)

    async with sdk_client(gateway_server, Person("alice"), logging_callback=on_log) as (client, _):
        conversation_id, before = await _started(client)
        output = _structured(
            await client.call_tool(
                "invoke_agent",
                {"user_query": "Nordic customers and order status?"},
                progress_callback=on_progress,
            )
        )
    assert "traces" not in output
    assert len(messages) == 4
    assert "customers/CustomersInRegion" in (messages[0] or "")
    events = [d for d in logged if isinstance(d, dict) and d.get("type") == "workflow_trace"]
    assert [e["direction"] for e in events] == ["agent_to_workflow", "workflow_to_agent"] * 2
    # The turn keeps its traces even when they were streamed.
    [turn] = await _turns(conversation_id, after=before)
    assert len(turn.traces) == 4


async def test_invoke_agent_without_a_model_names_the_admin_page(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        await client.call_tool("initialize", {})
        refusal = await _error(client.call_tool("invoke_agent", {"user_query": "Anything"}))
    assert refusal.error.code == -32003
    assert "No language model is configured" in refusal.error.message
    assert "admin" in refusal.error.message


async def test_a_turn_past_its_time_limit_leaves_no_half_turn(gateway_server, acme_model, script):
    script(workflow_agent=TWO_STEPS, delays={"workflow_agent": 4})
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        conversation_id, before = await _started(client)
        refusal = await _error(client.call_tool("invoke_agent", {"user_query": "Slow", "timeout_seconds": 1}))
        # The session is free again at once.
        after = _structured(await client.call_tool("execute_command", {"command": "orders/OrdersByStatus"}))
    assert refusal.error.code == -32004
    assert refusal.error.data["timeoutSeconds"] == 1
    turns = await _turns(conversation_id, after=before)
    assert [t.kind for t in turns] == ["command"]
    assert after["success"] is True


async def test_a_second_turn_on_another_worker_is_a_conflict(
    gateway_server, second_gateway_server, acme_model, script
):
    """One MCP session, two worker processes: the turn runs on the first, and the second refuses
    another turn of the same session from what the database says."""
    # Each of the agent's three model calls waits this long; the refusal comes during the first.
    script(workflow_agent=TWO_STEPS, delays={"workflow_agent": 2})
    scope = "workflows:read workflows:run workflows:agent data_agent:write ontologies:read"
    raw = RawMcp(await access_token(gateway_server, Person("alice"), scope=scope))
    # The turn (and litellm's first import in a fresh process) outlasts RawMcp's 15 s on a busy machine.
    raw.http.timeout = httpx.Timeout(120)
    try:
        session_id = await raw.initialize(gateway_server.mcp_url)
        await raw.result(
            gateway_server.mcp_url,
            "tools/call",
            {"name": "initialize", "arguments": {}},
            session_id=session_id,
        )
        held_before = await _held()
        slow = asyncio.create_task(
            raw.result(
                gateway_server.mcp_url,
                "tools/call",
                {"name": "invoke_agent", "arguments": {"user_query": "Slow"}},
                session_id=session_id,
            )
        )
        await _turn_running(held_before)
        refused = await raw.request(
            second_gateway_server.mcp_url,
            "tools/call",
            {"name": "execute_command", "arguments": {"command": "orders/OrdersByStatus"}},
            session_id=session_id,
        )
        running = not slow.done()
        finished = await slow
        after = await raw.result(
            second_gateway_server.mcp_url,
            "tools/call",
            {"name": "execute_command", "arguments": {"command": "orders/OrdersByStatus"}},
            session_id=session_id,
        )
    finally:
        await raw.aclose()
    assert running
    (message,) = [m for m in sse_messages(refused) if "id" in m]
    error = message["error"]
    assert error["code"] == -32009
    assert 1 <= error["data"]["retryAfterSeconds"] <= 60 + 10
    assert "in progress" in error["message"]
    assert finished["structuredContent"]["success"] is True
    assert after["structuredContent"]["success"] is True


async def _held() -> set[str]:
    return {
        key
        async for key in SessionBinding.objects.filter(turn_until__isnull=False).values_list("key", flat=True)
    }


async def _turn_running(held_before: set[str]) -> None:
    """Wait until a session other than ``held_before`` holds its turn lock."""
    for _ in range(200):
        if await _held() - held_before:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no turn started; held before: {held_before}")


# --- conversations ----------------------------------------------------------------------------


async def test_new_list_activate_and_a_restart_keeps_them(demo, database_url, tmp_path_factory):
    servers = _serve(tmp_path_factory, database_url, "workflows-restart")
    server = next(servers)
    try:
        async with sdk_client(server, Person("alice")) as (client, _):
            first = _structured(await client.call_tool("initialize", {}))["conversation_id"]
            await client.call_tool("execute_command", {"command": "orders/OrdersByStatus"})
            rotated = _structured(await client.call_tool("new_conversation", {}))
            listed = _structured(await client.call_tool("list_conversations", {"limit": 10}))
            activated = _structured(
                await client.call_tool("activate_conversation", {"conversation_id": first})
            )
            strangers = await _error(
                client.call_tool(
                    "activate_conversation", {"conversation_id": "00000000-0000-0000-0000-000000000000"}
                )
            )
        assert rotated["status"] == "ok"
        assert rotated["new_conversation_id"] != first
        assert rotated["summary_source"] == "derived"
        assert rotated["topic"]
        ids = [c["conversation_id"] for c in listed["conversations"]]
        assert ids[0] == rotated["new_conversation_id"] or first in ids
        assert first in ids
        assert activated["conversation_id"] == first
        assert activated["topic"] == rotated["topic"]
        assert strangers.error.code == -32002
        server.stop()
        server.start()
        async with sdk_client(server, Person("alice")) as (client, _):
            again = _structured(await client.call_tool("initialize", {"conversation_id": first}))
            listed_after = _structured(await client.call_tool("list_conversations", {}))
        assert again["conversation_id"] == first
        assert first in [c["conversation_id"] for c in listed_after["conversations"]]
        conversation = await Conversation.objects.aget(pk=first)
        assert conversation.topic == rotated["topic"]
    finally:
        next(servers, None)


async def test_feedback_lands_on_the_latest_turn(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        init = _structured(await client.call_tool("initialize", {}))
        await client.call_tool("new_conversation", {})
        none_yet = await _error(client.call_tool("post_feedback", {"binary_or_numeric_score": True}))
        await client.call_tool("execute_command", {"command": "orders/OrdersByStatus"})
        await client.call_tool("execute_command", {"command": "catalogue/ListCategories"})
        stored = _structured(
            await client.call_tool("post_feedback", {"binary_or_numeric_score": 0.8, "nl_feedback": "Useful"})
        )
        neither = await _error(client.call_tool("post_feedback", {}))
    assert none_yet.error.code == -32002
    assert neither.error.code == -32602
    turn = await Turn.objects.aget(pk=stored["turn_id"])
    assert (turn.feedback_score, turn.feedback_text, turn.request) == (
        0.8,
        "Useful",
        "catalogue/ListCategories",
    )
    assert str(turn.conversation_id) != init["conversation_id"]


# --- roles, eras, prompts ---------------------------------------------------------------------


async def test_a_viewer_neither_sees_nor_runs_query_commands(gateway_server, acme_model):
    async with sdk_client(gateway_server, Person("bob")) as (client, _):
        await client.call_tool("initialize", {})
        await client.call_tool(
            "execute_command", {"command": "catalogue/go_to_context <context>customers</context>"}
        )
        commands = _structured(await client.call_tool("get_commands", {}))
        refused = await _error(
            client.call_tool(
                "execute_command", {"command": "customers/CustomersInRegion <region>Nordics</region>"}
            )
        )
        whoami = _structured(await client.call_tool("execute_command", {"command": "customers/WhoAmI"}))
        agent = await _error(client.call_tool("invoke_agent", {"user_query": "Anything"}))
    names = {c["name"] for c in commands["commands"]}
    assert "customers/WhoAmI" in names
    assert "customers/CustomersInRegion" not in names
    assert refused.error.code == -32001
    assert whoami["success"] is True
    assert agent.error.code == -32001


async def test_on_2026_07_28_the_client_plays_the_session(gateway_server):
    async with sdk_client(gateway_server, Person("alice"), mode="2026-07-28") as (client, _):
        before = await _error(client.call_tool("get_commands", {}))
        init = _structured(await client.call_tool("initialize", {}))
        moved = _structured(
            await client.call_tool(
                "execute_command", {"command": "catalogue/go_to_context <context>orders</context>"}
            )
        )
        commands = _structured(await client.call_tool("get_commands", {}))
    assert before.error.code == -32002
    assert init["conversation_id"]
    assert moved["context"] == "orders"
    assert all(c["name"].startswith("orders/") for c in commands["commands"])


async def test_prompts_format_command_and_clarify_params(gateway_server):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        listed = await client.list_prompts()
        formatted = await client.get_prompt(
            "format-command",
            {"intent": "customers in the Nordics", "metadata": "customers/CustomersInRegion"},
        )
        clarified = await client.get_prompt(
            "clarify-params", {"error_message": "missing region", "metadata": "customers/CustomersInRegion"}
        )
    assert {"format-command", "clarify-params"} <= {p.name for p in listed.prompts}
    assert isinstance(formatted.messages[0].content, TextContent)
    assert "customers in the Nordics" in formatted.messages[0].content.text
    assert isinstance(clarified.messages[0].content, TextContent)
    assert "missing region" in clarified.messages[0].content.text


# --- hostile input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("invoke_assistant", {"user_query": "orders/OrdersByStatus\x00"}, -32602),
        ("invoke_assistant", {"user_query": "   "}, -32602),
        ("invoke_agent", {"user_query": "x" * 8_001}, -32602),
        ("invoke_agent", {"user_query": "Hi", "timeout_seconds": 0}, -32602),
        ("invoke_agent", {"user_query": "Hi", "timeout_seconds": 301}, -32602),
        ("execute_command", {"command": "orders/OrdersByStatus " + "x" * 5_000}, -32602),
        ("execute_command", {"command": ["orders/OrdersByStatus"]}, -32602),
        ("post_feedback", {"nl_feedback": "a\x00b"}, -32602),
        ("post_feedback", {"binary_or_numeric_score": [[[[[[[[[[1]]]]]]]]]]}, -32602),
        ("post_feedback", {"nl_feedback": "x" * 4_001}, -32602),
        ("list_conversations", {"limit": 0}, -32602),
        ("list_conversations", {"limit": 101}, -32602),
        ("activate_conversation", {"conversation_id": "not-a-uuid"}, -32002),
        ("activate_conversation", {"conversation_id": "\x00"}, -32002),
    ],
    ids=lambda value: str(value)[:30],
)
async def test_hostile_arguments_get_the_tools_own_errors(gateway_server, tool, arguments, code):
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        conversation_id, before = await _started(client)
        await client.call_tool("execute_command", {"command": "orders/OrdersByStatus"})
        refusal = await _error(client.call_tool(tool, arguments))
    assert refusal.error.code == code, refusal.error
    # Nothing was half-written: only the one command above became a turn.
    assert len(await _turns(conversation_id, after=before)) == 1


async def test_another_persons_conversation_is_never_reached(gateway_server):
    # bob, acme's viewer: another person of the same tenant.
    async with sdk_client(gateway_server, Person("bob")) as (client, _):
        bobs = _structured(await client.call_tool("initialize", {}))["conversation_id"]
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        own = _structured(await client.call_tool("initialize", {}))["conversation_id"]
        # Named at initialize, it is not hers: her own last conversation goes on.
        named = _structured(await client.call_tool("initialize", {"conversation_id": bobs}))
        refused = await _error(client.call_tool("activate_conversation", {"conversation_id": bobs}))
        listed = _structured(await client.call_tool("list_conversations", {"limit": 100}))
    assert named["conversation_id"] == own
    assert refused.error.code == -32002
    assert bobs not in [c["conversation_id"] for c in listed["conversations"]]


async def test_lone_surrogates_and_invalid_utf8_are_refused(gateway_server):
    """What the SDK client cannot send: JSON with an escaped lone surrogate, and bytes that are not
    UTF-8."""
    scope = "workflows:read workflows:run"
    raw = RawMcp(await access_token(gateway_server, Person("alice"), scope=scope))
    try:
        session_id = await raw.initialize(gateway_server.mcp_url)
        await raw.result(
            gateway_server.mcp_url,
            "tools/call",
            {"name": "initialize", "arguments": {}},
            session_id=session_id,
        )
        answers = [
            await raw.http.post(
                gateway_server.mcp_url,
                # Escaped (ensure_ascii): valid JSON that decodes to a lone surrogate.
                content=json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": index,
                        "method": "tools/call",
                        "params": {"name": name, "arguments": arguments},
                    }
                ),
                headers=raw.headers(session_id),
            )
            for index, (name, arguments) in enumerate(
                [
                    ("invoke_assistant", {"user_query": "\ud800"}),
                    ("post_feedback", {"nl_feedback": "bad \udfff"}),
                    ("execute_command", {"command": "customers/CustomersInRegion <region>\ud800</region>"}),
                ],
                start=10,
            )
        ]
        not_utf8 = await raw.http.post(
            gateway_server.mcp_url,
            content=b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"execute_command",'
            b'"arguments":{"command":"orders/OrdersByStatus \xff"}}}',
            headers=raw.headers(session_id),
        )
    finally:
        await raw.aclose()
    for answer in answers:
        (message,) = [m for m in sse_messages(answer) if "id" in m]
        assert message["error"]["code"] == -32602, message
    # Bytes that are not UTF-8 are not JSON: refused before the body reaches the tool.
    assert not_utf8.status_code == 400
    (message,) = sse_messages(not_utf8)
    assert message["error"]["code"] == -32700, message


async def test_new_conversation_with_a_model_and_when_the_model_fails(gateway_server, acme_model, script):
    script(
        conversation_summary=[
            {"error": "RateLimitError"},
            json.dumps({"topic": "Order statuses", "summary": "Counted the orders in each status."}),
        ]
    )
    async with sdk_client(gateway_server, Person("alice")) as (client, _):
        conversation_id, _before = await _started(client)
        await client.call_tool("execute_command", {"command": "orders/OrdersByStatus"})
        failed = await _error(client.call_tool("new_conversation", {}))
        unchanged = _structured(await client.call_tool("initialize", {}))
        rotated = _structured(await client.call_tool("new_conversation", {}))
    assert failed.error.code == -32005
    assert unchanged["conversation_id"] == conversation_id
    assert rotated["previous_conversation_id"] == conversation_id
    assert rotated["summary_source"] == "model"
    assert rotated["topic"].startswith("Order statuses")
    assert rotated["summary"] == "Counted the orders in each status."
    closed = await Conversation.objects.aget(pk=conversation_id)
    assert (closed.topic, closed.summary_derived) == (rotated["topic"], False)

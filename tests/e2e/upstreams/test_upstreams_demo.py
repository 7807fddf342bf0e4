"""The demo's upstream, as a new user meets it after ``make run``: globex's admin (carol) sees the
demo server's tools under the ``demo_`` prefix, beside Gatehouse's own, and calls one; acme's people
see none of them. The ``demo`` fixture (tests/e2e/conftest.py) ran ``bootstrap_demo``, which
registered the upstream: nothing here creates it."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from accounts.models import Tenant
from core.models import AuditAction, AuditOutcome
from mcp_gateway.pipeline.guard import INVALID_ARGUMENTS
from tests.e2e.harness import GLOBEX_DEMO_TOOLS, Person
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import RawMcp, sse_messages
from tests.e2e.stamping import StampingTransport, audit_events
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

DEMO_TOOLS = GLOBEX_DEMO_TOOLS


async def test_carol_sees_the_demo_tools_and_converts_a_temperature_through_them(server, committed):
    transport = StampingTransport()
    async with minted_sdk_client(committed, server, Person("carol"), transport=transport) as (client, _):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        converted = await client.call_tool(
            "demo_convert_units", {"value": 100, "from_unit": "C", "to_unit": "F"}
        )
        rolled = await client.call_tool("demo_roll_dice", {"sides": 6, "count": 3})
        counted = await client.call_tool("demo_word_count", {"text": "one two\nthree"})

    assert tools.keys() >= DEMO_TOOLS
    # Gatehouse's own tools are still there, unprefixed.
    assert "whoami" in tools
    # The schemas as the demo server publishes them.
    assert tools["demo_convert_units"].output_schema is not None
    assert "result" in tools["demo_convert_units"].output_schema["properties"]
    assert tools["demo_roll_dice"].input_schema["properties"]["sides"]["maximum"] == 1000

    assert not converted.is_error
    assert converted.structured_content == {"value": 100.0, "from_unit": "C", "to_unit": "F", "result": 212.0}
    assert rolled.structured_content is not None
    rolls = rolled.structured_content["rolls"]
    assert len(rolls) == 3
    assert all(1 <= roll <= 6 for roll in rolls)
    assert rolled.structured_content["total"] == sum(rolls)
    assert counted.structured_content == {"words": 3, "characters": 13, "lines": 2}

    [called] = await audit_events(transport.request_ids("tools/call")[0])
    assert (called.action, called.outcome, called.target) == (
        AuditAction.TOOL_CALLED,
        AuditOutcome.OK,
        "demo_convert_units",
    )
    assert called.tenant is not None
    assert called.tenant.slug == "globex"
    assert called.detail["result"]["upstream"] == "demo"


async def test_the_demo_resource_and_prompt_come_through_too(server, committed):
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        resources = {str(resource.uri) for resource in (await client.list_resources()).resources}
        units = await client.read_resource("demo://units")
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        prompt = await client.get_prompt(
            "demo_explain_conversion", {"value": "3", "from_unit": "mi", "to_unit": "km"}
        )

    assert "demo://units" in resources
    assert '"temperature": ["C", "F", "K"]' in units.contents[0].text  # type: ignore[union-attr]
    assert "demo_explain_conversion" in prompts
    assert "Convert 3 mi to km" in prompt.messages[0].content.text  # type: ignore[union-attr]


async def test_a_conversion_the_demo_refuses_is_a_tool_error_the_model_can_read(server, committed):
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        result = await client.call_tool("demo_convert_units", {"value": 1, "from_unit": "C", "to_unit": "m"})
    assert result.is_error
    assert "Cannot convert between a length and a temperature." in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "arguments",
    [
        {"text": "a\x00b"},
        {"text": "x" * 100_001},
        {"text": {"nested": [[[[["deep"]]]]]}},
    ],
    ids=["nul", "too-long", "not-a-string"],
)
async def test_hostile_text_for_word_count_is_counted_or_refused_never_a_crash(server, committed, arguments):
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        try:
            result = await client.call_tool("demo_word_count", arguments)
        except MCPError as refused:
            outcome = ("refused", refused.error.code)
        else:
            outcome = ("answered", result.is_error)
        # The session still serves the next call.
        after = await client.call_tool("demo_word_count", {"text": "still here"})
    assert after.structured_content == {"words": 2, "characters": 10, "lines": 1}
    if arguments["text"] == "a\x00b":
        assert outcome == ("answered", False)
    else:
        assert outcome[0] == "refused"


async def test_a_lone_surrogate_for_word_count_is_refused_before_it_reaches_the_demo(server, committed):
    raw = RawMcp(minted_token(committed, server, Person("carol")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "demo_word_count", "arguments": {"text": "lone\ud800"}},
        }
        # json.dumps escapes the lone surrogate as \\ud800, as a hostile client would send it.
        response = await raw.http.post(
            server.mcp_url, content=json.dumps(body).encode(), headers=raw.headers(session_id)
        )
        after = await raw.result(
            server.mcp_url,
            "tools/call",
            {"name": "demo_word_count", "arguments": {"text": "still here"}},
            session_id=session_id,
        )
    finally:
        await raw.aclose()
    [message] = [m for m in sse_messages(response) if "id" in m] or [response.json()]
    assert message["error"]["code"] == INVALID_PARAMS, message
    assert after["structuredContent"] == {"words": 2, "characters": 10, "lines": 1}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("demo_roll_dice", {"sides": 10**9}),
        ("demo_roll_dice", {"count": 0}),
        ("demo_roll_dice", {"sides": "six"}),
        ("demo_convert_units", {"value": 1e300, "from_unit": "m", "to_unit": "km"}),
        ("demo_convert_units", {"value": 1, "from_unit": "parsec", "to_unit": "m"}),
        ("demo_convert_units", {"value": 1, "from_unit": "m"}),
    ],
    ids=["huge-sides", "no-dice", "sides-not-a-number", "huge-value", "unknown-unit", "missing-unit"],
)
async def test_arguments_outside_the_demo_s_schema_are_refused_before_they_reach_it(
    server, committed, tool, arguments
):
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        with pytest.raises(MCPError) as refused:
            await client.call_tool(tool, arguments)
    assert refused.value.error.code == INVALID_PARAMS
    assert refused.value.error.message == f"{INVALID_ARGUMENTS} for {tool}"


@pytest.fixture
def globex_viewer(committed):
    user = committed(UserFactory, username="gwen")
    committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="globex"), role="viewer")
    return Person("gwen", password=DEFAULT_PASSWORD)


async def test_a_globex_viewer_uses_the_demo_upstream_which_asks_only_for_mcp_read(
    server, committed, globex_viewer
):
    async with minted_sdk_client(committed, server, globex_viewer) as (client, _):
        names = {tool.name for tool in (await client.list_tools()).tools}
        counted = await client.call_tool("demo_word_count", {"text": "a b c"})
    assert names >= DEMO_TOOLS
    assert counted.structured_content == {"words": 3, "characters": 5, "lines": 1}


async def test_acme_s_people_do_not_see_globex_s_demo_upstream(server, committed):
    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        names = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError):
            await client.call_tool("demo_convert_units", {"value": 1, "from_unit": "m", "to_unit": "ft"})
    assert not names & DEMO_TOOLS

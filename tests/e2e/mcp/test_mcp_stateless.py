"""2026-07-28 requests over raw HTTP: a capability the client did not declare (-32021, HTTP 400),
log messages only to a request that asked for them, hostile ``_meta``, and calls validated against
a JSON Schema 2020-12 input schema. The ``subscriptions/listen`` streams are in
``test_listen_streams``."""

from __future__ import annotations

import pytest

from accounts.models import Role
from tests.e2e.mcp.modern_caller import request_meta

LOG_LEVEL = "io.modelcontextprotocol/logLevel"

pytestmark = pytest.mark.django_db


# -32021: a capability the request needs and the client did not declare.


async def test_a_call_that_needs_sampling_is_refused_with_32021_and_http_400(server, caller):
    alice = caller(toolsets=["conformance"])
    response, [message] = await alice.call_tool(server.mcp_url, "test_missing_capability")
    assert response.status_code == 400, response.text
    assert message["id"] == alice.next_id
    assert message["error"]["code"] == -32021
    assert message["error"]["data"]["requiredCapabilities"] == {"sampling": {}}


async def test_a_call_that_needs_the_user_is_refused_with_32021_naming_elicitation(server, caller):
    alice = caller(toolsets=["conformance"])
    response, [message] = await alice.call_tool(
        server.mcp_url, "test_elicitation", arguments={"message": "Hi?"}
    )
    assert response.status_code == 400, response.text
    assert message["error"]["code"] == -32021
    assert set(message["error"]["data"]["requiredCapabilities"]) == {"elicitation"}


async def test_a_declared_capability_is_not_refused(server, caller):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(
        server.mcp_url, "test_missing_capability", meta=request_meta({"sampling": {}})
    )
    assert response.status_code == 200, response.text
    assert "error" not in messages[-1], messages
    # 2026-07-28 has no back-channel to ask the model mid-call: the tool says so in its result.
    assert messages[-1]["result"]["isError"] is True


async def test_a_question_for_the_user_leaves_in_the_result_never_as_a_request_on_the_stream(server, caller):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(
        server.mcp_url, "test_streaming_elicitation", meta=request_meta({"elicitation": {}})
    )
    assert response.status_code == 200, response.text
    assert all("method" not in m or m["method"].startswith("notifications/") for m in messages), messages
    result = messages[-1]["result"]
    assert result["resultType"] == "input_required", result
    assert result["inputRequests"]["confirmation"]["method"] == "elicitation/create"


async def test_the_answer_comes_with_the_next_call(server, caller):
    alice = caller(toolsets=["conformance"])
    answer = {"action": "accept", "content": {"confirmed": True}}
    response, messages = await alice.call_tool(
        server.mcp_url,
        "test_streaming_elicitation",
        meta=request_meta({"elicitation": {}}),
        input_responses={"confirmation": answer},
    )
    assert response.status_code == 200, response.text
    text = messages[-1]["result"]["content"][0]["text"]
    assert text == "Confirmation: action=accept, content={'confirmed': True}"


async def test_a_tool_that_can_do_without_the_user_still_runs_without_elicitation(server, caller):
    """``client_elicit_optional``'s callers (``ask_question``) fall back: no -32021 for them. The
    same call without the capability is refused only where the tool truly needs the answer."""
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(server.mcp_url, "test_simple_text")
    assert response.status_code == 200, response.text
    assert messages[-1]["result"]["content"][0]["text"].startswith("This is a simple text")


async def test_a_viewer_is_refused_for_the_capability_as_anyone_else(server, caller):
    bob = caller(role=Role.VIEWER, scope="mcp:read", toolsets=["conformance"])
    response, [message] = await bob.call_tool(server.mcp_url, "test_missing_capability")
    assert response.status_code == 400, response.text
    assert message["error"]["code"] == -32021


# Log messages: only to a request that set a log level.


async def test_no_log_message_reaches_a_request_without_a_log_level(server, caller):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(server.mcp_url, "test_logging_tool")
    assert response.status_code == 200, response.text
    assert [m for m in messages if m.get("method") == "notifications/message"] == []
    assert messages[-1]["result"]["content"][0]["text"] == "Logging tool executed"


async def test_log_messages_reach_a_request_at_the_level_it_asked_for(server, caller):
    alice = caller(toolsets=["conformance"])
    _, heard = await alice.call_tool(
        server.mcp_url, "test_logging_tool", meta=request_meta(**{LOG_LEVEL: "info"})
    )
    _, above = await alice.call_tool(
        server.mcp_url,
        "test_logging_tool",
        meta=request_meta(**{LOG_LEVEL: "error"}),
    )
    logs = [m["params"]["data"] for m in heard if m.get("method") == "notifications/message"]
    assert logs == ["Logging tool started", "Logging tool working", "Logging tool finished"]
    assert [m for m in above if m.get("method") == "notifications/message"] == []


@pytest.mark.parametrize("level", ["loud", 7, ["info"], {"level": "info"}, "info\x00"])
async def test_a_log_level_that_is_not_a_level_is_refused_never_a_500(server, caller, level):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(
        server.mcp_url, "test_logging_tool", meta=request_meta(**{LOG_LEVEL: level})
    )
    assert response.status_code == 400, response.text
    assert [m["error"]["code"] for m in messages] == [-32602]


async def test_a_null_log_level_is_heard_as_none(server, caller):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(
        server.mcp_url, "test_logging_tool", meta=request_meta(**{LOG_LEVEL: None})
    )
    assert response.status_code == 200, response.text
    assert [m.get("method") for m in messages] == [None]
    assert messages[-1]["result"]["isError"] is False


# Hostile _meta.


@pytest.mark.parametrize(
    "capabilities",
    [[], "sampling", {"sampling": "yes"}, {"sampling": []}, {"elicitation": 1}],
)
async def test_malformed_client_capabilities_are_invalid_params(server, caller, capabilities):
    alice = caller(toolsets=["conformance"])
    meta = request_meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = capabilities
    response, [message] = await alice.call_tool(server.mcp_url, "test_missing_capability", meta=meta)
    assert response.status_code == 400, response.text
    assert message["error"]["code"] == -32602


async def test_a_huge_meta_is_answered_in_the_endpoints_own_shape(server, caller):
    alice = caller(toolsets=["conformance"])
    meta = request_meta(**{"x-padding": "a" * 3_000_000, "x-deep": [[[[["deep"]]]]]})
    response, [message] = await alice.call_tool(server.mcp_url, "test_missing_capability", meta=meta)
    assert response.status_code == 400, response.text
    assert message["error"]["code"] == -32021
    too_big = request_meta(**{"x-padding": "a" * 5_000_000})
    response, [message] = await alice.call_tool(server.mcp_url, "test_missing_capability", meta=too_big)
    assert response.status_code == 413
    assert message["error"]["code"] == -32600


# The JSON Schema 2020-12 fixture: calls are validated against the schema it publishes.


@pytest.mark.parametrize(
    ("arguments", "valid"),
    [
        ({"name": "Ann", "email": "ann@acme.test"}, True),
        ({"contactMethod": "phone", "phone": "555"}, True),
        ({"contactMethod": "phone", "email": "ann@acme.test"}, False),  # if/then: phone needed
        ({"name": "Ann"}, False),  # allOf/anyOf: phone or email
        ({"email": "a@b", "address": {"street": 5}}, False),  # $ref into $defs
        ({"email": "a@b", "unexpected": True}, False),  # additionalProperties
    ],
)
async def test_the_2020_12_fixture_is_called_against_its_published_schema(server, caller, arguments, valid):
    alice = caller(toolsets=["conformance"])
    response, [message] = await alice.call_tool(
        server.mcp_url, "json_schema_2020_12_tool", arguments=arguments
    )
    if valid:
        assert message["result"]["content"][0]["text"].startswith("ok: "), message
    else:
        assert response.status_code == 400, response.text
        assert message["error"]["code"] == -32602

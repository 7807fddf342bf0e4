"""2026-07-28 requests over raw HTTP: a capability the client did not declare (-32021, HTTP 400),
log messages only to a request that asked for them, and list-changed notifications on
``subscriptions/listen`` streams, delivered across workers and only to the tenant whose lists changed.

No test waits for something not to happen: where a tenant must hear nothing of another's change,
the other tenant's change is made first and its own change after, and the stream's frames, which
arrive in order, show only its own."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from accounts.models import Role
from data_agent.models import Ontology, OntologyStatus
from data_agent.resources import ONTOLOGY_URI
from mcp_gateway.models import TenantToolset
from tests.e2e.raw_mcp import MCP_HEADERS
from tests.support.factories import AccessTokenFactory, MembershipFactory, OntologyFactory

pytestmark = pytest.mark.django_db

MODERN = "2026-07-28"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"


def _meta(capabilities: dict[str, Any] | None = None, /, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        **extra,
    }


class Caller:
    """One token's raw 2026-07-28 requests."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self.http = http
        self.token = token
        self.next_id = 100

    def headers(self, method: str, name: str | None = None) -> dict[str, str]:
        headers = {
            **MCP_HEADERS,
            "authorization": f"Bearer {self.token}",
            "mcp-protocol-version": MODERN,
            "mcp-method": method,
        }
        if name is not None:
            headers["mcp-name"] = name
        return headers

    def body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    async def call_tool(
        self,
        url: str,
        name: str,
        *,
        arguments: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        input_responses: dict[str, Any] | None = None,
    ) -> tuple[httpx.Response, list[dict[str, Any]]]:
        params = {"name": name, "arguments": arguments or {}, "_meta": meta or _meta()}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        response = await self.http.post(
            url, json=self.body("tools/call", params), headers=self.headers("tools/call", name)
        )
        return response, _messages(response)

    @asynccontextmanager
    async def listen(self, url: str, notifications: dict[str, bool]) -> AsyncIterator[Stream]:
        params = {"_meta": _meta(), "notifications": notifications}
        body = self.body("subscriptions/listen", params)
        async with self.http.stream(
            "POST", url, json=body, headers=self.headers("subscriptions/listen")
        ) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            yield Stream(response, body["id"])


class Stream:
    """The frames of one listen stream, in order."""

    def __init__(self, response: httpx.Response, subscription_id: int) -> None:
        self.lines = response.aiter_lines()
        self.subscription_id = subscription_id

    async def next(self) -> dict[str, Any]:
        async for line in self.lines:
            if line.startswith("data:"):
                return json.loads(line[5:])
        raise AssertionError("the stream ended")

    async def acknowledged(self) -> dict[str, Any]:
        first = await self.next()
        assert first["method"] == ACKNOWLEDGED, first
        assert first["params"]["_meta"][SUBSCRIPTION_ID] == self.subscription_id
        return first


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


@pytest.fixture
async def http():
    async with httpx.AsyncClient(timeout=httpx.Timeout(30)) as client:
        yield client


@pytest.fixture
def caller(committed, http, server):
    """A caller of a tenant of its own, with the toolsets given on for that tenant."""

    def make(
        *, role: str = Role.ADMIN, scope: str = "mcp:read mcp:write", tenant=None, toolsets=()
    ) -> Caller:
        membership = committed(MembershipFactory, role=role, **({"tenant": tenant} if tenant else {}))
        for name in toolsets:
            committed(
                lambda name=name: TenantToolset.objects.update_or_create(
                    tenant=membership.tenant, toolset=name, defaults={"enabled": True}
                )
            )
        token = committed(AccessTokenFactory, membership=membership, scope=scope, resource=[server.mcp_url])
        made = Caller(http, token.token)
        made.tenant = membership.tenant  # type: ignore[attr-defined]
        return made

    return make


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
        server.mcp_url, "test_missing_capability", meta=_meta({"sampling": {}})
    )
    assert response.status_code == 200, response.text
    assert "error" not in messages[-1], messages
    # 2026-07-28 has no back-channel to ask the model mid-call: the tool says so in its result.
    assert messages[-1]["result"]["isError"] is True


async def test_a_question_for_the_user_leaves_in_the_result_never_as_a_request_on_the_stream(server, caller):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(
        server.mcp_url, "test_streaming_elicitation", meta=_meta({"elicitation": {}})
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
        meta=_meta({"elicitation": {}}),
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
        server.mcp_url, "test_logging_tool", meta=_meta(**{"io.modelcontextprotocol/logLevel": "info"})
    )
    _, above = await alice.call_tool(
        server.mcp_url, "test_logging_tool", meta=_meta(**{"io.modelcontextprotocol/logLevel": "error"})
    )
    logs = [m["params"]["data"] for m in heard if m.get("method") == "notifications/message"]
    assert logs == ["Logging tool started", "Logging tool working", "Logging tool finished"]
    assert [m for m in above if m.get("method") == "notifications/message"] == []


@pytest.mark.parametrize("level", ["loud", 7, ["info"], {"level": "info"}, "info\x00"])
async def test_a_log_level_that_is_not_a_level_is_refused_never_a_500(server, caller, level):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(
        server.mcp_url, "test_logging_tool", meta=_meta(**{"io.modelcontextprotocol/logLevel": level})
    )
    assert response.status_code == 400, response.text
    assert [m["error"]["code"] for m in messages] == [-32602]


async def test_a_null_log_level_is_heard_as_none(server, caller):
    alice = caller(toolsets=["conformance"])
    response, messages = await alice.call_tool(
        server.mcp_url, "test_logging_tool", meta=_meta(**{"io.modelcontextprotocol/logLevel": None})
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
    meta = _meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = capabilities
    response, [message] = await alice.call_tool(server.mcp_url, "test_missing_capability", meta=meta)
    assert response.status_code == 400, response.text
    assert message["error"]["code"] == -32602


async def test_a_huge_meta_is_answered_in_the_endpoints_own_shape(server, caller):
    alice = caller(toolsets=["conformance"])
    meta = _meta(**{"x-padding": "a" * 3_000_000, "x-deep": [[[[["deep"]]]]]})
    response, [message] = await alice.call_tool(server.mcp_url, "test_missing_capability", meta=meta)
    assert response.status_code == 400, response.text
    assert message["error"]["code"] == -32021
    too_big = _meta(**{"x-padding": "a" * 5_000_000})
    response, [message] = await alice.call_tool(server.mcp_url, "test_missing_capability", meta=too_big)
    assert response.status_code == 413
    assert message["error"]["code"] == -32600


# List changes on subscriptions/listen.


async def test_a_toolset_change_on_another_worker_reaches_the_tenants_listen_stream(
    server, second_server, caller
):
    alice = caller(toolsets=["conformance"])
    async with alice.listen(server.mcp_url, {"toolsListChanged": True, "promptsListChanged": True}) as stream:
        await stream.acknowledged()
        response, messages = await alice.call_tool(second_server.mcp_url, "test_trigger_tool_change")
        assert response.status_code == 200, response.text
        assert "now on" in messages[-1]["result"]["content"][0]["text"]
        changed = {(await stream.next())["method"], (await stream.next())["method"]}
    assert changed == {TOOLS_CHANGED, PROMPTS_CHANGED}


async def test_each_notification_carries_the_subscription_id_and_the_filter_is_honoured(server, caller):
    alice = caller(toolsets=["conformance"])
    async with alice.listen(server.mcp_url, {"promptsListChanged": True}) as stream:
        ack = await stream.acknowledged()
        assert ack["params"]["notifications"] == {"promptsListChanged": True}
        await alice.call_tool(server.mcp_url, "test_trigger_tool_change")
        await alice.call_tool(server.mcp_url, "test_trigger_prompt_change")
        # Two changes, each of tools and prompts: only the prompts ones arrive.
        frames = [await stream.next(), await stream.next()]
    assert [f["method"] for f in frames] == [PROMPTS_CHANGED, PROMPTS_CHANGED]
    assert {f["params"]["_meta"][SUBSCRIPTION_ID] for f in frames} == {stream.subscription_id}


async def test_another_tenants_change_never_reaches_a_stream(server, second_server, caller, committed):
    """Tenant B's stream hears A's change (made first) not at all: the first frames it gets are
    those of its own change (made second), and they arrive in order."""
    alice = caller(toolsets=["conformance"])
    carol = caller(role=Role.VIEWER, scope="mcp:read")  # another tenant, a viewer's token
    filters = {"toolsListChanged": True, "resourcesListChanged": True}
    async with (
        carol.listen(server.mcp_url, filters) as theirs,
        alice.listen(server.mcp_url, filters) as ours,
    ):
        await theirs.acknowledged()
        await ours.acknowledged()
        await alice.call_tool(second_server.mcp_url, "test_trigger_tool_change")
        assert (await ours.next())["method"] == TOOLS_CHANGED
        # Carol's tenant turns on a toolset with resources as well: its change is tools, resources.
        committed(
            lambda: TenantToolset.objects.create(tenant=carol.tenant, toolset="conformance", enabled=True)
        )
        frames = [await theirs.next(), await theirs.next()]
    assert [f["method"] for f in frames] == [TOOLS_CHANGED, RESOURCES_CHANGED]


async def test_a_viewer_listens_but_cannot_change_the_lists(server, caller):
    bob = caller(role=Role.VIEWER, scope="mcp:read", toolsets=["conformance"])
    async with bob.listen(server.mcp_url, {"toolsListChanged": True}) as stream:
        await stream.acknowledged()
        response, messages = await bob.call_tool(server.mcp_url, "test_trigger_tool_change")
    # A scope the viewer's role can never hold: refused as JSON-RPC, with nothing to step up to.
    assert response.status_code == 200, response.text
    refusal = messages[-1]
    assert refusal["error"]["code"] == -32001, refusal
    assert refusal["error"]["data"] == {"required": ["mcp:write"], "missing": ["mcp:write"]}
    rows = await TenantToolset.objects.filter(tenant=bob.tenant, toolset="conformance_dynamic").acount()
    assert rows == 0


async def test_an_operators_change_in_another_process_reaches_the_stream(server, caller, committed):
    """The admin and ``manage.py toolsets`` write the row in their own process (here, the test's)."""
    alice = caller(toolsets=["conformance"])
    async with alice.listen(server.mcp_url, {"toolsListChanged": True}) as stream:
        await stream.acknowledged()
        committed(
            lambda: TenantToolset.objects.update_or_create(
                tenant=alice.tenant, toolset="conformance", defaults={"enabled": False}
            )
        )
        assert (await stream.next())["method"] == TOOLS_CHANGED
    # And the tenant's tools are gone indeed.
    _, [message] = await alice.call_tool(server.mcp_url, "test_simple_text")
    assert message["error"]["code"] == -32602, message


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


async def test_an_ontology_edited_elsewhere_reaches_a_listen_stream_subscribed_to_it(
    server, caller, committed
):
    alice = caller(toolsets=["data_agent"], scope="mcp:read ontologies:read")
    ontology = committed(OntologyFactory, tenant=alice.tenant, status=OntologyStatus.READY)
    uri = ONTOLOGY_URI.format(id=ontology.pk)
    other = committed(OntologyFactory, tenant=alice.tenant, status=OntologyStatus.READY)
    async with alice.listen(server.mcp_url, {"resourceSubscriptions": [uri]}) as stream:
        await stream.acknowledged()
        committed(lambda: Ontology.objects.get(pk=other.pk).save())  # not subscribed: not heard
        committed(lambda: Ontology.objects.get(pk=ontology.pk).save())
        updated = await stream.next()
    assert updated["method"] == "notifications/resources/updated"
    assert updated["params"]["uri"] == uri

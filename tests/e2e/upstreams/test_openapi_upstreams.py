"""A REST API as tools, end to end: acme registers a local API by the URL of its OpenAPI document
(through the service, as the admin and the console do); alice's MCP client lists the generated
tool with its schema, calls it and gets structured content and text, and the call is audited with
the upstream's name; bob, a viewer, calls the read operations but neither sees nor calls the one
that changes data; carol, of another tenant, neither sees nor calls any of them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from accounts.models import Tenant
from core.errors import INSUFFICIENT_SCOPE
from core.models import AuditAction, AuditOutcome
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.stamping import StampingTransport, audit_event_awaited
from tests.support.openapi_api import OpenApiApi
from upstreams.models import Transport, Upstream
from upstreams.services import upstream_save

pytestmark = pytest.mark.django_db

INVALID_PARAMS = -32602
PERMISSION_DENIED = -32001


@pytest.fixture(scope="module")
def api() -> Iterator[OpenApiApi]:
    server = OpenApiApi().start()
    yield server
    server.stop()


def _registered(*, api: OpenApiApi) -> Upstream:
    upstream = Upstream(
        tenant=Tenant.objects.get(slug="acme"),
        name="pets",
        transport=Transport.OPENAPI,
        openapi_url=api.document_url,
        prefix_tools=True,
    )
    upstream_save(upstream=upstream, allow_stdio=False)
    return upstream


async def test_alice_lists_and_calls_a_tool_generated_from_the_api_and_the_call_is_audited(
    server, committed, api
):
    committed(_registered, api=api)
    transport = StampingTransport()

    async with minted_sdk_client(committed, server, Person("alice"), transport=transport) as (client, _):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        shown = await client.call_tool("pets_showPet", {"petId": "42/../admin"})

    assert tools["pets_showPet"].input_schema == {
        "type": "object",
        "properties": {"petId": {"type": "string"}, "X-Trace": {"type": "string"}},
        "required": ["petId"],
        "additionalProperties": False,
    }
    assert tools["pets_showPet"].description == "One pet, by its id."
    assert tools["pets_createPet"].annotations is not None
    assert tools["pets_createPet"].annotations.read_only_hint is False
    assert shown.is_error is False
    assert shown.structured_content == {"id": "42%2F..%2Fadmin", "name": "Rex"}
    [content] = shown.content
    assert isinstance(content, TextContent)
    assert json.loads(content.text) == shown.structured_content
    assert api.requests[-1]["path"] == "/v1/pets/42%2F..%2Fadmin"
    [request_id] = transport.request_ids("tools/call")
    event = await audit_event_awaited(request_id)
    assert (event.action, event.outcome, event.target) == (
        AuditAction.TOOL_CALLED,
        AuditOutcome.OK,
        "pets_showPet",
    )
    assert event.detail["result"]["upstream"] == "pets"


async def test_a_viewer_cannot_use_the_write_operation_and_another_tenant_sees_none(server, committed, api):
    committed(_registered, api=api)
    posts_before = len([r for r in api.requests if r["method"] == "POST"])

    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        viewer_tools = {tool.name for tool in (await client.list_tools()).tools}
        listed = await client.call_tool("pets_listPets", {"limit": 1})
        with pytest.raises(MCPError) as refused_write:
            await client.call_tool("pets_createPet", {"body": {"name": "Bob's"}})
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        carol_tools = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused_other:
            await client.call_tool("pets_showPet", {"petId": "1"})

    assert {"pets_listPets", "pets_showPet"} <= viewer_tools
    assert "pets_createPet" not in viewer_tools
    assert listed.structured_content == {"result": [{"id": "1", "name": "Rex"}]}
    assert refused_write.value.code == PERMISSION_DENIED
    assert refused_write.value.message.startswith(INSUFFICIENT_SCOPE)
    assert not any(name.startswith("pets_") for name in carol_tools)
    assert refused_other.value.code == INVALID_PARAMS
    assert "Unknown tool" in refused_other.value.message
    assert len([r for r in api.requests if r["method"] == "POST"]) == posts_before

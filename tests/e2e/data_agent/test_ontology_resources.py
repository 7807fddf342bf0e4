"""The data catalogue through the official SDK client against Daphne: the demo's acme ontology as
resources, readable by acme's people (viewers too), never by another tenant, and never without the
`ontologies:read` scope."""

from __future__ import annotations

import json

import pytest
import yaml
from asgiref.sync import sync_to_async
from mcp.shared.exceptions import MCPError
from mcp_types import TextResourceContents

from data_agent.models import Ontology
from data_agent.sample import DESCRIPTIONS, ONTOLOGY_NAME
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import RawMcp, sse_messages

pytestmark = pytest.mark.django_db

NOT_FOUND = -32002
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
async def acme_ontology_id(server) -> str:
    ontology = await sync_to_async(Ontology.objects.get)(tenant__slug="acme", name=ONTOLOGY_NAME)
    return str(ontology.pk)


def _text(result) -> str:
    (content,) = result.contents
    return content.text


async def test_alice_lists_and_reads_the_three_kinds_of_catalogue_resource(
    server, committed, acme_ontology_id
):
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        catalogue = json.loads(_text(await client.read_resource("gatehouse://ontologies")))
        ontology = json.loads(_text(await client.read_resource(f"gatehouse://ontologies/{acme_ontology_id}")))
        dataset_result = await client.read_resource(
            f"gatehouse://ontologies/{acme_ontology_id}/datasets/orders"
        )

    assert "gatehouse://ontologies" in {str(r.uri) for r in listed.resources}
    assert {t.uri_template for t in templates.resource_templates} >= {
        "gatehouse://ontologies/{id}",
        "gatehouse://ontologies/{id}/datasets/{name}",
    }
    assert catalogue == [
        {
            "id": acme_ontology_id,
            "name": ONTOLOGY_NAME,
            "description": ontology["description"],
            "datasetCount": 5,
            "fieldCount": 22,
        }
    ]
    assert {d["name"]: d["source"] for d in ontology["datasets"]} == {
        "customers": "public.customers",
        "order_lines": "public.order_lines",
        "orders": "public.orders",
        "products": "public.products",
        "regions": "public.regions",
    }
    assert {"from": "orders.customer_id", "to": "customers.id"} in ontology["relationships"]
    (content,) = dataset_result.contents
    assert isinstance(content, TextResourceContents)
    assert content.mime_type == "application/yaml"
    dataset = yaml.safe_load(content.text)
    assert dataset["name"] == "orders"
    assert dataset["description"] == DESCRIPTIONS["orders"]
    assert dataset["sourceTable"] == "public.orders"
    assert dataset["fields"][2] == {
        "name": "order_date",
        "type": "date",
        "description": DESCRIPTIONS["orders.order_date"],
        "sourceColumn": "order_date",
    }


async def test_bob_as_a_viewer_reads_the_catalogue_too(server, committed, acme_ontology_id):
    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        catalogue = json.loads(_text(await client.read_resource("gatehouse://ontologies")))
        ontology = json.loads(_text(await client.read_resource(f"gatehouse://ontologies/{acme_ontology_id}")))
    assert [entry["id"] for entry in catalogue] == [acme_ontology_id]
    assert ontology["name"] == ONTOLOGY_NAME


@pytest.mark.parametrize(
    "path", ["{unknown}", "{unknown}/datasets/orders", "{acme}/datasets/payroll", "not-a-uuid"]
)
async def test_an_unknown_ontology_or_dataset_is_not_found(server, committed, acme_ontology_id, path):
    uri = "gatehouse://ontologies/" + path.format(unknown=UNKNOWN_ID, acme=acme_ontology_id)
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
    assert refused.value.code == NOT_FOUND


async def test_another_tenant_cannot_read_acme_s_ontology(
    server, committed, acme_ontology_id, tenant_toolset
):
    tenant_toolset("globex", "data_agent", enabled=True)
    async with minted_sdk_client(committed, server, Person("carol")) as (client, _):
        catalogue = json.loads(_text(await client.read_resource("gatehouse://ontologies")))
        refusals = []
        for suffix in ("", "/datasets/orders"):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(f"gatehouse://ontologies/{acme_ontology_id}{suffix}")
            refusals.append((refused.value.code, refused.value.message))
    assert catalogue == []
    # Exactly what an id that exists nowhere gets: nothing confirms acme's ontology exists.
    assert refusals == [(NOT_FOUND, "No such ontology.")] * 2


async def test_a_token_without_the_catalogue_scope_is_refused(server, committed):
    # The scripted client asks for mcp:read and mcp:write only.
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        response = await raw.request(
            server.mcp_url, "resources/read", {"uri": "gatehouse://ontologies"}, session_id=session_id
        )
    finally:
        await raw.aclose()
    (error,) = [m["error"] for m in sse_messages(response) if "error" in m]
    assert error["code"] == -32001
    assert error["data"]["missing"] == ["ontologies:read"]


async def test_a_token_without_the_catalogue_scope_is_told_an_unknown_uri_is_unknown(server, committed):
    # As for tools, a URI that names no resource is refused as unknown before scopes are looked at.
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        response = await raw.request(
            server.mcp_url,
            "resources/read",
            {"uri": "gatehouse://ontologies/a/b/c/d"},
            session_id=session_id,
        )
    finally:
        await raw.aclose()
    (error,) = [m["error"] for m in sse_messages(response) if "error" in m]
    assert error["code"] == -32602

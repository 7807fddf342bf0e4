"""The data catalogue as MCP resources (scope ``ontologies:read``), for the caller's tenant only.

``gatehouse://ontologies`` lists the ready ontologies, ``gatehouse://ontologies/{id}`` describes one
with its datasets, and ``gatehouse://ontologies/{id}/datasets/{name}`` is one dataset as YAML.
``CATALOGUE`` declares the scope they need; the request guard enforces it, and translates what the
selectors raise (``NotFound`` ...) once, through ``guarded_resource``.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from mcp.server.mcpserver import Context, MCPServer

from core.db import db_call
from data_agent.models import Dataset, Ontology
from data_agent.scopes import SCOPE_ONTOLOGIES_READ
from data_agent.selectors import dataset_get, ontology_datasets, ontology_get_ready, ontology_list_ready
from mcp_gateway.kernel.identity import identity_from_context, identity_from_current_request
from mcp_gateway.kernel.registry import resource_prefix
from mcp_gateway.pipeline.guard import guarded_resource

LIST_URI = "gatehouse://ontologies"
ONTOLOGY_URI = "gatehouse://ontologies/{id}"
DATASET_URI = "gatehouse://ontologies/{id}/datasets/{name}"

CATALOGUE = resource_prefix(uri=LIST_URI, scopes=[SCOPE_ONTOLOGIES_READ])


def _source(dataset: Dataset) -> str:
    return (
        f"{dataset.source_schema}.{dataset.source_table}" if dataset.source_schema else dataset.source_table
    )


def ontology_list_payload(*, tenant_id: int) -> list[dict[str, Any]]:
    return [
        {
            "id": str(ontology.pk),
            "name": ontology.name,
            "description": ontology.description,
            "datasetCount": ontology.dataset_count,  # type: ignore[attr-defined]
            "fieldCount": ontology.field_count,  # type: ignore[attr-defined]
        }
        for ontology in ontology_list_ready(tenant_id=tenant_id)
    ]


def ontology_payload(*, tenant_id: int, ontology_id: str) -> dict[str, Any]:
    ontology: Ontology = ontology_get_ready(tenant_id=tenant_id, ontology_id=ontology_id)
    relationships = ontology.relationships.select_related("from_field__dataset", "to_field__dataset")
    return {
        "id": str(ontology.pk),
        "name": ontology.name,
        "description": ontology.description,
        "datasets": [
            {"name": d.name, "description": d.description, "source": _source(d)}
            for d in ontology_datasets(ontology=ontology)
        ],
        "relationships": [
            {
                "from": f"{r.from_field.dataset.name}.{r.from_field.name}",
                "to": f"{r.to_field.dataset.name}.{r.to_field.name}",
            }
            for r in relationships
        ],
    }


def dataset_payload(*, tenant_id: int, ontology_id: str, name: str) -> dict[str, Any]:
    ontology = ontology_get_ready(tenant_id=tenant_id, ontology_id=ontology_id)
    dataset = dataset_get(ontology=ontology, name=name)
    return {
        "name": dataset.name,
        "description": dataset.description,
        "sourceTable": _source(dataset),
        "fields": [
            {
                "name": f.name,
                "type": f.type,
                "description": f.description,
                "sourceColumn": f.source_column,
            }
            for f in dataset.fields.all()
        ],
    }


def install(server: MCPServer) -> None:

    @server.resource(
        LIST_URI,
        name="ontologies",
        mime_type="application/json",
        description="Your tenant's ready ontologies: id, name, description, dataset and field counts.",
    )
    @guarded_resource
    async def ontologies() -> str:
        # A static resource: the SDK passes it no Context (see ``mcp_gateway.kernel.identity``).
        identity = identity_from_current_request()
        return json.dumps(await db_call(ontology_list_payload, tenant_id=identity.tenant_id))

    @server.resource(
        ONTOLOGY_URI,
        name="ontology",
        mime_type="application/json",
        description="One ontology with its datasets (name, description, source table) and joins.",
    )
    @guarded_resource
    async def ontology(id: str, ctx: Context) -> str:
        identity = identity_from_context(ctx)
        return json.dumps(await db_call(ontology_payload, tenant_id=identity.tenant_id, ontology_id=id))

    @server.resource(
        DATASET_URI,
        name="dataset",
        mime_type="application/yaml",
        description="One dataset as YAML: description, source table, fields with types and descriptions.",
    )
    @guarded_resource
    async def dataset(id: str, name: str, ctx: Context) -> str:
        identity = identity_from_context(ctx)
        payload = await db_call(dataset_payload, tenant_id=identity.tenant_id, ontology_id=id, name=name)
        return yaml.safe_dump(payload, sort_keys=False, allow_unicode=True)

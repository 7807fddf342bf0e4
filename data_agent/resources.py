"""The data catalogue as MCP resources (scope ``ontologies:read``), for the caller's tenant only.

``gatehouse://ontologies`` lists the ready ontologies, ``gatehouse://ontologies/{id}`` describes one
with its datasets, and ``gatehouse://ontologies/{id}/datasets/{name}`` is one dataset as YAML.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from mcp.server.mcpserver import Context, MCPServer

from core.db import db_call
from core.errors import InsufficientScope
from core.identity import Identity
from data_agent.models import Dataset, Ontology
from data_agent.scopes import SCOPE_ONTOLOGIES_READ
from data_agent.selectors import dataset_get, ontology_datasets, ontology_get_ready, ontology_list_ready
from mcp_gateway.identity import identity_current, identity_from_context
from mcp_gateway.jsonrpc_errors import as_mcp_error

LIST_URI = "gatehouse://ontologies"
ONTOLOGY_URI = "gatehouse://ontologies/{id}"
DATASET_URI = "gatehouse://ontologies/{id}/datasets/{name}"


def _authorized(identity: Identity) -> Identity:
    if SCOPE_ONTOLOGIES_READ not in identity.scopes:
        raise as_mcp_error(
            InsufficientScope(required=[SCOPE_ONTOLOGIES_READ], missing=[SCOPE_ONTOLOGIES_READ])
        )
    return identity


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


async def _read(func: Any, **kwargs: Any) -> Any:
    try:
        return await db_call(func, **kwargs)
    except Exception as error:
        # The SDK passes MCPError through unchanged; anything else would become a generic error.
        raise as_mcp_error(error) from error


def install(server: MCPServer) -> None:

    @server.resource(
        LIST_URI,
        name="ontologies",
        mime_type="application/json",
        description="Your tenant's ready ontologies: id, name, description, dataset and field counts.",
    )
    async def ontologies() -> str:
        identity = _authorized(identity_current())
        return json.dumps(await _read(ontology_list_payload, tenant_id=identity.tenant_id))

    @server.resource(
        ONTOLOGY_URI,
        name="ontology",
        mime_type="application/json",
        description="One ontology with its datasets (name, description, source table) and joins.",
    )
    async def ontology(id: str, ctx: Context) -> str:
        identity = _authorized(identity_from_context(ctx))
        return json.dumps(await _read(ontology_payload, tenant_id=identity.tenant_id, ontology_id=id))

    @server.resource(
        DATASET_URI,
        name="dataset",
        mime_type="application/yaml",
        description="One dataset as YAML: description, source table, fields with types and descriptions.",
    )
    async def dataset(id: str, name: str, ctx: Context) -> str:
        identity = _authorized(identity_from_context(ctx))
        payload = await _read(dataset_payload, tenant_id=identity.tenant_id, ontology_id=id, name=name)
        return yaml.safe_dump(payload, sort_keys=False, allow_unicode=True)

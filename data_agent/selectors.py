"""Reads of data sources and ontologies, always scoped to the caller's tenant."""

from __future__ import annotations

import uuid

from django.db.models import Count, QuerySet

from data_agent.crypto import secret_decrypt
from data_agent.models import Dataset, DataSource, Ontology, OntologyStatus
from mcp_gateway.errors import NotFound

ONTOLOGY_NOT_FOUND = "No such ontology."
DATASET_NOT_FOUND = "No such dataset in this ontology."


def ontology_list_ready(*, tenant_id: int) -> QuerySet[Ontology]:
    """The tenant's ready ontologies, with their dataset and field counts."""
    return (
        Ontology.objects.filter(tenant_id=tenant_id, status=OntologyStatus.READY)
        .annotate(
            dataset_count=Count("datasets", distinct=True),
            field_count=Count("datasets__fields", distinct=True),
        )
        .order_by("name")
    )


def ontology_get_ready(*, tenant_id: int, ontology_id: str | uuid.UUID) -> Ontology:
    """The tenant's ready ontology with this id. Unknown, another tenant's, not ready and
    malformed ids are all the same NotFound, so nothing confirms another tenant's ontology."""
    try:
        key = ontology_id if isinstance(ontology_id, uuid.UUID) else uuid.UUID(str(ontology_id))
    except ValueError as exc:
        raise NotFound(ONTOLOGY_NOT_FOUND) from exc
    ontology = (
        Ontology.objects.select_related("data_source")
        .filter(pk=key, tenant_id=tenant_id, status=OntologyStatus.READY)
        .first()
    )
    if ontology is None:
        raise NotFound(ONTOLOGY_NOT_FOUND)
    return ontology


def ontology_datasets(*, ontology: Ontology) -> list[Dataset]:
    return list(ontology.datasets.order_by("name"))


def dataset_get(*, ontology: Ontology, name: str) -> Dataset:
    dataset = ontology.datasets.filter(name=name).prefetch_related("fields").first()
    if dataset is None:
        raise NotFound(DATASET_NOT_FOUND)
    return dataset


def ontology_source_tables(*, ontology: Ontology) -> frozenset[str]:
    """The source tables the SQL gate allows for this ontology (unqualified names)."""
    return frozenset(ontology.datasets.values_list("source_table", flat=True))


def data_source_url(*, data_source: DataSource) -> str:
    """The decrypted connection URL. Never log or return it to a client."""
    return secret_decrypt(token=data_source.url_encrypted)

"""Reads of data sources and ontologies, always scoped to the caller's tenant."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Count, QuerySet

from core.crypto import secret_decrypt
from core.errors import NotFound
from data_agent.models import AgentPreference, Dataset, DataSource, Ontology, OntologyStatus

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


def data_source_url(*, data_source: DataSource) -> str:
    """The decrypted connection URL. Never log or return it to a client."""
    return secret_decrypt(token=data_source.url_encrypted)


@dataclass(frozen=True)
class CatalogField:
    name: str
    type: str
    description: str
    source_column: str


@dataclass(frozen=True)
class CatalogDataset:
    name: str
    description: str
    source_table: str
    fields: tuple[CatalogField, ...]


@dataclass(frozen=True)
class CatalogJoin:
    """``from_dataset.from_column`` references ``to_dataset.to_column``: many rows of the first
    side meet one row of the second."""

    from_dataset: str
    from_column: str
    to_dataset: str
    to_column: str


@dataclass(frozen=True)
class Catalog:
    """A ready ontology as the data agent's phases read it, loaded once per question."""

    ontology_id: str
    name: str
    description: str
    dialect: str
    datasets: tuple[CatalogDataset, ...]
    joins: tuple[CatalogJoin, ...]

    def dataset(self, name: str) -> CatalogDataset | None:
        return next((d for d in self.datasets if d.name == name), None)

    @property
    def datasets_by_table(self) -> dict[str, str]:
        return {d.source_table: d.name for d in self.datasets}

    @property
    def source_tables(self) -> frozenset[str]:
        return frozenset(d.source_table for d in self.datasets)


def ontology_catalog(*, ontology: Ontology) -> Catalog:
    datasets = ontology.datasets.order_by("name").prefetch_related("fields")
    relationships = ontology.relationships.select_related("from_field__dataset", "to_field__dataset")
    return Catalog(
        ontology_id=str(ontology.pk),
        name=ontology.name,
        description=ontology.description,
        dialect=ontology.data_source.kind,
        datasets=tuple(
            CatalogDataset(
                name=d.name,
                description=d.description,
                source_table=d.source_table,
                fields=tuple(
                    CatalogField(
                        name=f.name, type=f.type, description=f.description, source_column=f.source_column
                    )
                    for f in d.fields.all()
                ),
            )
            for d in datasets
        ),
        joins=tuple(
            CatalogJoin(
                from_dataset=r.from_field.dataset.name,
                from_column=r.from_field.source_column,
                to_dataset=r.to_field.dataset.name,
                to_column=r.to_field.source_column,
            )
            for r in relationships
        ),
    )


def agent_preference_get(*, user_id: int, tenant_id: int) -> AgentPreference:
    """The person's preferences in this tenant; an unsaved blank one when they have set none."""
    found = AgentPreference.objects.filter(user_id=user_id, tenant_id=tenant_id).first()
    return found or AgentPreference(user_id=user_id, tenant_id=tenant_id)

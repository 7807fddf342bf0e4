"""Writes: data sources (URL encrypted on the way in) and ontologies built from a source's schema."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from django.db import transaction

from accounts.models import Tenant
from core.crypto import secret_encrypt
from data_agent.introspection import TableInfo, schema_read
from data_agent.models import (
    AgentPreference,
    Dataset,
    DatasetField,
    DataSource,
    Ontology,
    OntologyStatus,
    Relationship,
)
from data_agent.selectors import data_source_url

logger = logging.getLogger(__name__)

STATUS_DETAIL_MAX = 500
NO_TABLES = "The data source has no tables."


def data_source_create(*, tenant: Tenant, name: str, kind: str, url: str) -> DataSource:
    return DataSource.objects.create(
        tenant=tenant, name=name, kind=kind, url_encrypted=secret_encrypt(plaintext=url)
    )


def data_source_set_url(*, data_source: DataSource, url: str) -> DataSource:
    data_source.url_encrypted = secret_encrypt(plaintext=url)
    data_source.save(update_fields=["url_encrypted", "updated"])
    return data_source


def _scrubbed(*, message: str, url: str) -> str:
    """An error message safe to store: the URL and its password never appear in it."""
    password = urlsplit(url).password
    for secret in (url, password):
        if secret:
            message = message.replace(secret, "***")
    return message[:STATUS_DETAIL_MAX]


def ontology_create_from_source(
    *,
    tenant: Tenant,
    data_source: DataSource,
    name: str,
    description: str = "",
    descriptions: Mapping[str, str] | None = None,
) -> Ontology:
    """Introspect the source and describe it: status creating, then ready (or failed, with the
    error message and never the credentials). ``descriptions`` maps ``"table"`` and
    ``"table.column"`` to human descriptions (the demo uses it; operators edit them in the admin)."""
    ontology = Ontology.objects.create(
        tenant=tenant, data_source=data_source, name=name, description=description
    )
    url = ""
    try:
        url = data_source_url(data_source=data_source)
        tables = schema_read(kind=data_source.kind, url=url)
        if not tables:
            raise ValueError(NO_TABLES)
        with transaction.atomic():
            _ontology_fill(ontology=ontology, tables=tables, descriptions=descriptions or {})
    except Exception as exc:
        detail = _scrubbed(message=f"{type(exc).__name__}: {exc}", url=url)
        # The message only: a traceback's locals could carry the URL.
        logger.warning("Ontology %s could not be generated: %s", ontology.pk, detail)
        ontology.status, ontology.status_detail = OntologyStatus.FAILED, detail
    else:
        ontology.status, ontology.status_detail = OntologyStatus.READY, ""
    ontology.save(update_fields=["status", "status_detail", "updated"])
    return ontology


def _ontology_fill(
    *, ontology: Ontology, tables: Sequence[TableInfo], descriptions: Mapping[str, str]
) -> None:
    fields: dict[tuple[str, str], DatasetField] = {}
    for table in tables:
        dataset = Dataset.objects.create(
            ontology=ontology,
            name=table.name,
            description=descriptions.get(table.name, ""),
            source_schema=table.schema,
            source_table=table.name,
        )
        for column, data_type in table.columns:
            fields[(table.name, column)] = DatasetField.objects.create(
                dataset=dataset,
                name=column,
                type=data_type,
                description=descriptions.get(f"{table.name}.{column}", ""),
                source_column=column,
            )
    for table in tables:
        for fk in table.foreign_keys:
            source, target = fields.get((table.name, fk.column)), fields.get((fk.to_table, fk.to_column))
            if source is not None and target is not None:
                Relationship.objects.create(ontology=ontology, from_field=source, to_field=target)


def agent_preference_set(
    *, user_id: int, tenant_id: int, default_time_period: str | None, notes: str | None
) -> AgentPreference:
    """Change a person's data agent preferences; None leaves a preference as it is, "" clears it."""
    with transaction.atomic():
        preference, _ = AgentPreference.objects.select_for_update().get_or_create(
            user_id=user_id, tenant_id=tenant_id
        )
        if default_time_period is not None:
            preference.default_time_period = default_time_period.strip()
        if notes is not None:
            preference.notes = notes.strip()
        preference.full_clean()
        preference.save()
    return preference

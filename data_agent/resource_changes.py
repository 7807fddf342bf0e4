"""Tell subscribed clients when the catalogue resources they read change (an ontology edited).

An edit to an ontology, one of its datasets, fields or relationships changes what one or more of
``resources``' URIs read; each is logged once the transaction commits (``mcp_gateway.kernel.changes``),
and every worker's streams of the tenant tell the sessions subscribed to it
(``notifications/resources/updated``). Saved through the ORM only (the admin, the services, a
shell); the catalogue cache (``catalogue``) does not need this, it checks row versions itself.
A cascade (an ontology deleted with its datasets) is one change per URI, not one per row.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from data_agent.models import Dataset, DatasetField, Ontology, Relationship
from data_agent.resources import DATASET_URI, LIST_URI, ONTOLOGY_URI
from mcp_gateway.kernel.changes import change_record
from mcp_gateway.models import ChangeKind

_pending = threading.local()


def _touched(instance: Any) -> tuple[int, list[str]]:
    """The tenant and the URIs whose content ``instance`` is part of."""
    if isinstance(instance, Ontology):
        return instance.tenant_id, [LIST_URI, ONTOLOGY_URI.format(id=instance.pk)]
    if isinstance(instance, Relationship):
        ontology = instance.ontology
        return ontology.tenant_id, [ONTOLOGY_URI.format(id=ontology.pk)]
    dataset = instance if isinstance(instance, Dataset) else instance.dataset
    ontology = dataset.ontology
    return ontology.tenant_id, [
        LIST_URI,
        ONTOLOGY_URI.format(id=ontology.pk),
        DATASET_URI.format(id=ontology.pk, name=dataset.name),
    ]


def _changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    try:
        tenant_id, uris = _touched(instance)
    except ObjectDoesNotExist:
        # Its ontology went first in a cascade: the ontology's own change covers it.
        return
    pending: set[tuple[int, str]] = getattr(_pending, "changes", None) or set()
    _pending.changes = pending
    pending.update((tenant_id, uri) for uri in uris)
    transaction.on_commit(_flush)


def _flush() -> None:
    pending: set[tuple[int, str]] = getattr(_pending, "changes", None) or set()
    _pending.changes = set()
    for tenant_id, uri in sorted(pending):
        change_record(tenant_id=tenant_id, kind=ChangeKind.RESOURCE, uri=uri)


def resource_changes_connect() -> None:
    for model in (Ontology, Dataset, DatasetField, Relationship):
        uid = f"data_agent.resource_changes.{model.__name__}"
        post_save.connect(_changed, sender=model, dispatch_uid=f"{uid}.save")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"{uid}.delete")

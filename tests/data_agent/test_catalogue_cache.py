"""The catalogue ``run_query`` and ``ask_question`` read is cached per process and checked against
the database on every call: an edit made by any path (another worker, raw SQL) is seen by the next
call, and a deleted, not-ready or another tenant's ontology is refused as it always was."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from asgiref.sync import sync_to_async

from core.db import psycopg_connect_kwargs
from core.errors import NotFound
from data_agent.catalogue import catalogue_get, catalogue_get_sync
from data_agent.models import Dataset, DataSource, Ontology, OntologyStatus
from data_agent.selectors import ONTOLOGY_NOT_FOUND
from data_agent.services import data_source_set_url
from tests.support.factories import (
    DatasetFactory,
    DatasetFieldFactory,
    OntologyFactory,
    RelationshipFactory,
    TenantFactory,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]

NEW_URL = "sqlite:////nonexistent/moved.sqlite3"


@pytest.fixture
def ontology() -> Ontology:
    orders = DatasetFactory.create(name="orders")
    ontology = orders.ontology
    customers = DatasetFactory.create(ontology=ontology, name="customers")
    RelationshipFactory.create(
        from_field=DatasetFieldFactory.create(dataset=orders, name="customer_id"),
        to_field=DatasetFieldFactory.create(dataset=customers, name="id"),
    )
    return ontology


async def _get(ontology: Ontology, tenant_id: int | None = None):
    return await catalogue_get(tenant_id=tenant_id or ontology.tenant_id, ontology_id=str(ontology.pk))


def _raw(statement: str, *params: object) -> None:
    """A write on a connection of its own, as another worker (or an operator's psql) would make it."""
    with psycopg.connect(**psycopg_connect_kwargs()) as conn:
        conn.execute(statement, params)


async def test_an_unchanged_ontology_is_served_from_the_cache(ontology):
    first = await _get(ontology)
    assert first.source.allowed_tables == frozenset({"orders", "customers"})
    assert await _get(ontology) is first


async def test_a_removed_dataset_is_no_longer_queryable_on_the_next_call(ontology):
    await _get(ontology)
    await Dataset.objects.filter(ontology=ontology, name="customers").adelete()
    assert (await _get(ontology)).source.allowed_tables == frozenset({"orders"})


async def test_a_renamed_source_table_is_seen_on_the_next_call(ontology):
    await _get(ontology)
    _raw(
        "UPDATE data_agent_dataset SET source_table = 'orders_v2' WHERE ontology_id = %s AND name = 'orders'",
        ontology.pk,
    )
    assert (await _get(ontology)).source.allowed_tables == frozenset({"orders_v2", "customers"})


async def test_an_edited_field_or_join_is_seen_by_the_next_question(ontology):
    def catalog():
        return catalogue_get_sync(tenant_id=ontology.tenant_id, ontology_id=ontology.pk).catalog

    first = await sync_to_async(catalog)()
    assert first.joins
    _raw(
        "UPDATE data_agent_datasetfield SET description = 'Who ordered' WHERE name = 'customer_id'"
        " AND dataset_id IN (SELECT id FROM data_agent_dataset WHERE ontology_id = %s)",
        ontology.pk,
    )
    described = await sync_to_async(catalog)()
    assert described.dataset("orders").fields[0].description == "Who ordered"
    _raw("DELETE FROM data_agent_relationship WHERE ontology_id = %s", ontology.pk)
    assert (await sync_to_async(catalog)()).joins == ()


async def test_a_changed_data_source_url_is_used_on_the_next_call(ontology):
    assert (await _get(ontology)).source.url != NEW_URL
    source = await DataSource.objects.aget(pk=ontology.data_source_id)
    await sync_to_async(data_source_set_url)(data_source=source, url=NEW_URL)
    assert (await _get(ontology)).source.url == NEW_URL


@pytest.mark.parametrize("change", ["data source deleted", "ontology deleted", "not ready"])
async def test_a_cached_ontology_gone_or_not_ready_is_refused(ontology, change):
    await _get(ontology)
    if change == "data source deleted":
        await DataSource.objects.filter(pk=ontology.data_source_id).adelete()
    elif change == "ontology deleted":
        await Ontology.objects.filter(pk=ontology.pk).adelete()
    else:
        await Ontology.objects.filter(pk=ontology.pk).aupdate(status=OntologyStatus.FAILED)
    with pytest.raises(NotFound, match=ONTOLOGY_NOT_FOUND):
        await _get(ontology)


async def test_another_tenant_cannot_reach_an_ontology_cached_for_its_owner(ontology):
    await _get(ontology)
    outsider = await sync_to_async(TenantFactory.create)()
    with pytest.raises(NotFound, match=ONTOLOGY_NOT_FOUND):
        await _get(ontology, tenant_id=outsider.pk)
    with pytest.raises(NotFound, match=ONTOLOGY_NOT_FOUND):
        await sync_to_async(catalogue_get_sync)(tenant_id=outsider.pk, ontology_id=ontology.pk)


@pytest.mark.parametrize(
    "hostile",
    ["", "1 OR 1=1", "'; DROP TABLE data_agent_ontology; --", "x" * 10_000, "\x00", str(uuid.uuid4())],
    # Ids that every pytest process computes alike (pytest-xdist workers must collect the same set).
    ids=["empty", "sql-or", "sql-drop", "huge", "nul", "unknown-uuid"],
)
async def test_a_hostile_or_unknown_id_is_not_found(ontology, hostile):
    await _get(ontology)
    with pytest.raises(NotFound, match=ONTOLOGY_NOT_FOUND):
        await catalogue_get(tenant_id=ontology.tenant_id, ontology_id=hostile)
    assert await Ontology.objects.filter(pk=ontology.pk).aexists()


async def test_the_cache_keeps_only_its_size_and_can_be_switched_off(ontology, settings):
    other = await sync_to_async(OntologyFactory.create)(data_source__tenant=ontology.tenant)
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_AGENT_CATALOGUE_CACHE_SIZE": 1}
    first = await _get(ontology)
    await _get(other)
    assert await _get(ontology) is not first  # pushed out by the other one
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_AGENT_CATALOGUE_CACHE_SIZE": 0}
    assert await _get(ontology) is not await _get(ontology)

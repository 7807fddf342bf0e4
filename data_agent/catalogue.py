"""What a query or a question reads about an ontology (its datasets, fields and joins, and its data
source's connection), cached per process and checked against the database on every call.

Loading it takes three ORM queries on Django's database thread, after its connection health check,
a noticeable part of a ``run_query`` (docs/benchmarks.md). So each process keeps the
``DATA_AGENT_CATALOGUE_CACHE_SIZE`` catalogues it used last, and every call first reads the
ontology's version in one statement on the hot-path pool (``core.db``: on the event loop, no thread
hop, no health check): a hash of the row versions (PostgreSQL's ``xmin``) of the ontology, its data
source, its datasets, their fields and its relationships. A row's ``xmin`` changes whenever the row
is written, by any path (the admin, a service, a shell, raw SQL) and a deleted row leaves the hash,
so an edit made anywhere is seen by every process's next call, with no message to miss. The same
statement checks the tenant and the ready status: another tenant's, a not-ready or a deleted
ontology (a deleted data source deletes its ontologies) returns no row and is refused as before by
``ontology_get_ready``.

The check costs index scans over the ontology's rows (no content is sent), so it grows with the
ontology, as the load it replaces did. On SQLite (the embedded default) there is no ``xmin``: the
catalogue is loaded on every call, as before.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from django.db import connection

from core.conf import gatehouse_settings
from core.db import db_call, hot_path_fetchone
from data_agent.models import OntologyStatus
from data_agent.query_pool import QuerySource
from data_agent.selectors import Catalog, data_source_url, ontology_catalog, ontology_get_ready
from data_agent.source_connections import source_connections_close

# Row versions of everything the catalogue is made of; no row unless the ontology is the tenant's
# and ready. Sorted, so the hash does not depend on the order rows are read in.
CATALOGUE_VERSION_SQL = """
SELECT md5(concat_ws(',', o.xmin, s.xmin, (
    SELECT string_agg(v, ',' ORDER BY v) FROM (
        SELECT 'd' || d.id || ':' || d.xmin FROM data_agent_dataset d WHERE d.ontology_id = o.id
        UNION ALL
        SELECT 'f' || f.id || ':' || f.xmin
          FROM data_agent_datasetfield f JOIN data_agent_dataset d ON d.id = f.dataset_id
         WHERE d.ontology_id = o.id
        UNION ALL
        SELECT 'r' || r.id || ':' || r.xmin FROM data_agent_relationship r WHERE r.ontology_id = o.id
    ) AS rows (v)
)))
  FROM data_agent_ontology o JOIN data_agent_datasource s ON s.id = o.data_source_id
 WHERE o.id = %s AND o.tenant_id = %s AND o.status = %s
"""


@dataclass(frozen=True)
class CatalogueEntry:
    """A ready ontology as queries (``source``) and questions (``catalog``) read it."""

    source: QuerySource
    catalog: Catalog


Key = tuple[int, uuid.UUID]
_cache: OrderedDict[Key, tuple[str, CatalogueEntry]] = OrderedDict()
_lock = threading.Lock()


def catalogue_load(*, tenant_id: int, ontology_id: str | uuid.UUID) -> CatalogueEntry:
    """From the database, uncached: NotFound as ``ontology_get_ready``."""
    ontology = ontology_get_ready(tenant_id=tenant_id, ontology_id=ontology_id)
    catalog = ontology_catalog(ontology=ontology)
    source = QuerySource(
        id=ontology.data_source_id,
        kind=ontology.data_source.kind,
        url=data_source_url(data_source=ontology.data_source),
        allowed_tables=catalog.source_tables,
        datasets_by_table=catalog.datasets_by_table,
    )
    return CatalogueEntry(source=source, catalog=catalog)


async def catalogue_get(*, tenant_id: int, ontology_id: str) -> CatalogueEntry:
    """The tenant's ready ontology, from this process's cache while its version is unchanged.
    NotFound for an unknown, malformed, not-ready or another tenant's ontology."""
    key = _cache_key(tenant_id, ontology_id)
    if key is None or not _caching():
        return await db_call(catalogue_load, tenant_id=tenant_id, ontology_id=ontology_id)
    row = await hot_path_fetchone(CATALOGUE_VERSION_SQL, (key[1], tenant_id, OntologyStatus.READY.value))
    version = row[0] if row else None
    cached, stale = _lookup(key, version)
    if cached is not None:
        return cached
    # Loaded after its version was read: at least that new, so a later edit is never missed.
    entry = await db_call(catalogue_load, tenant_id=tenant_id, ontology_id=key[1])
    _store(key, version, entry, stale)
    return entry


def catalogue_get_sync(*, tenant_id: int, ontology_id: str | uuid.UUID) -> CatalogueEntry:
    """As ``catalogue_get``, for code already on Django's database thread."""
    key = _cache_key(tenant_id, ontology_id)
    if key is None or not _caching():
        return catalogue_load(tenant_id=tenant_id, ontology_id=ontology_id)
    with connection.cursor() as cursor:
        cursor.execute(CATALOGUE_VERSION_SQL, (key[1], tenant_id, OntologyStatus.READY.value))
        row = cursor.fetchone()
    version = row[0] if row else None
    cached, stale = _lookup(key, version)
    if cached is not None:
        return cached
    entry = catalogue_load(tenant_id=tenant_id, ontology_id=key[1])
    _store(key, version, entry, stale)
    return entry


def _caching() -> bool:
    return connection.vendor == "postgresql" and gatehouse_settings.DATA_AGENT_CATALOGUE_CACHE_SIZE > 0


def _cache_key(tenant_id: int, ontology_id: str | uuid.UUID) -> Key | None:
    # A malformed id goes to the uncached load, which refuses it as every other unknown one.
    if isinstance(ontology_id, uuid.UUID):
        return tenant_id, ontology_id
    try:
        return tenant_id, uuid.UUID(str(ontology_id))
    except ValueError:
        return None


def _lookup(key: Key, version: str | None) -> tuple[CatalogueEntry | None, CatalogueEntry | None]:
    """(the cached entry if still at ``version``, else None; the outdated entry it replaces)."""
    with _lock:
        found = _cache.get(key)
        if found is None:
            return None, None
        if found[0] == version:
            _cache.move_to_end(key)
            return found[1], None
        del _cache[key]
    if version is None:
        # Deleted or no longer ready (with its data source, perhaps): its idle connections go too.
        source_connections_close(url=found[1].source.url)
    return None, found[1]


def _store(key: Key, version: str | None, entry: CatalogueEntry, stale: CatalogueEntry | None) -> None:
    if stale is not None and stale.source.url != entry.source.url:
        # The data source's URL changed: no query will ask for the old one's connections again.
        source_connections_close(url=stale.source.url)
    if version is None:
        return
    with _lock:
        _cache[key] = (version, entry)
        _cache.move_to_end(key)
        while len(_cache) > gatehouse_settings.DATA_AGENT_CATALOGUE_CACHE_SIZE:
            _cache.popitem(last=False)

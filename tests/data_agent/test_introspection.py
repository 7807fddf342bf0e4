"""Introspection reads tables, column types and foreign keys from PostgreSQL and SQLite sources,
read-only, and a source that cannot be read leaves a failed ontology that names no secret."""

from __future__ import annotations

import sqlite3

import pytest

from data_agent.introspection import ForeignKey, schema_read, sqlite_connect_read_only, sqlite_path
from data_agent.models import OntologyStatus
from data_agent.sample import sample_database_create
from data_agent.services import NO_TABLES, ontology_create_from_source
from tests.support.factories import DataSourceFactory

pytestmark = pytest.mark.django_db


def _tables(kind: str, url: str) -> dict[str, tuple[dict[str, str], list[ForeignKey]]]:
    return {t.name: (dict(t.columns), t.foreign_keys) for t in schema_read(kind=kind, url=url)}


def test_it_reads_a_postgresql_source_through_the_information_schema():
    sample = sample_database_create(tenant_slug="acme")
    tables = _tables("postgres", sample.url)
    assert set(tables) == {"regions", "customers", "products", "orders", "order_lines"}
    columns, foreign_keys = tables["order_lines"]
    assert columns == {
        "id": "integer",
        "order_id": "integer",
        "product_id": "integer",
        "quantity": "integer",
        "unit_price": "numeric",
    }
    assert sorted(foreign_keys, key=lambda fk: fk.column) == [
        ForeignKey("order_id", "orders", "id"),
        ForeignKey("product_id", "products", "id"),
    ]
    assert tables["orders"][0]["order_date"] == "date"


def test_it_reads_a_sqlite_source_through_pragmas(tmp_path):
    path = tmp_path / "shop.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE teams (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute('CREATE TABLE "odd name" (id INTEGER PRIMARY KEY, team INTEGER REFERENCES teams (id))')
    conn.close()
    tables = _tables("sqlite", f"sqlite:///{path}")
    assert tables == {
        "odd name": ({"id": "integer", "team": "integer"}, [ForeignKey("team", "teams", "id")]),
        "teams": ({"id": "integer", "name": "text"}, []),
    }


def test_a_sqlite_source_is_opened_read_only(tmp_path):
    path = tmp_path / "shop.sqlite3"
    sqlite3.connect(path).close()

    conn = sqlite_connect_read_only(url=f"sqlite:///{path}")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("CREATE TABLE t (x)")
    conn.close()


@pytest.mark.parametrize("url", ["postgresql://x@y/z", "sqlite:", "sqlite://"])
def test_a_sqlite_url_must_name_a_file(url):
    with pytest.raises(ValueError, match="sqlite:////absolute"):
        sqlite_path(url=url)


def test_an_unreachable_source_fails_without_its_password():
    source = DataSourceFactory.create(kind="postgres", url="postgresql://reader:pa55-w0rd@127.0.0.1:1/sales")
    ontology = ontology_create_from_source(tenant=source.tenant, data_source=source, name="sales")
    assert ontology.status == OntologyStatus.FAILED
    assert "OperationalError" in ontology.status_detail
    assert "pa55-w0rd" not in ontology.status_detail
    assert not ontology.datasets.exists()


def test_an_empty_source_fails_with_a_clear_message(tmp_path):
    path = tmp_path / "empty.sqlite3"
    sqlite3.connect(path).close()
    source = DataSourceFactory.create(kind="sqlite", url=f"sqlite:///{path}")
    ontology = ontology_create_from_source(tenant=source.tenant, data_source=source, name="empty")
    assert ontology.status == OntologyStatus.FAILED
    assert NO_TABLES in ontology.status_detail

"""Data sources keep their URLs encrypted; ontologies are found only in their own tenant and only
when ready; the demo's sample database is realistic, deterministic, created once per version of
its data, and a test run's samples go with it."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connections
from psycopg import sql

from core.crypto import secret_decrypt, secret_encrypt
from core.env import env_fernet_key
from core.errors import NotFound
from data_agent.models import DataSource, Ontology, OntologyStatus
from data_agent.sample import (
    DATA_SOURCE_NAME,
    FIRST_ORDER_DATE,
    LAST_ORDER_DATE,
    ONTOLOGY_NAME,
    _postgres_sample,
    sample_database_create,
    sample_database_ensure,
    sample_rows,
    sample_sqlite_create,
    sample_sqlite_version,
    sample_version,
)
from data_agent.selectors import (
    ONTOLOGY_NOT_FOUND,
    data_source_url,
    ontology_get_ready,
    ontology_list_ready,
)
from data_agent.services import data_source_create
from mcp_gateway.models import TenantToolset
from tests.support.admin_support import admin_url
from tests.support.factories import DatasetFactory, DataSourceFactory, OntologyFactory, TenantFactory
from tests.support.sample_databases import sample_databases_drop

pytestmark = pytest.mark.django_db

SECRET_URL = "postgresql://reader:s3cr3t-pa55@db.example:5432/sales"


# Credentials


def test_a_data_source_url_is_stored_encrypted_and_decrypts(tenant):
    source = data_source_create(tenant=tenant, name="sales", kind="postgres", url=SECRET_URL)
    stored = DataSource.objects.values_list("url_encrypted", flat=True).get(pk=source.pk)
    assert "s3cr3t" not in stored
    assert "db.example" not in stored
    assert data_source_url(data_source=source) == SECRET_URL


def test_a_configured_key_is_used_and_another_key_cannot_decrypt(settings):
    from cryptography.fernet import Fernet

    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_SOURCE_ENCRYPTION_KEY": Fernet.generate_key().decode()}
    token = secret_encrypt(plaintext=SECRET_URL)
    assert secret_decrypt(token=token) == SECRET_URL
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_SOURCE_ENCRYPTION_KEY": Fernet.generate_key().decode()}
    with pytest.raises(ValueError, match="cannot be decrypted"):
        secret_decrypt(token=token)


def test_a_malformed_key_in_the_environment_fails_loudly(monkeypatch):
    monkeypatch.setenv("DATA_SOURCE_ENCRYPTION_KEY", "not-a-fernet-key")
    with pytest.raises(ImproperlyConfigured, match="must be a Fernet key"):
        env_fernet_key("DATA_SOURCE_ENCRYPTION_KEY")


def test_the_admin_stores_a_new_url_encrypted_and_never_shows_it(client, operator, tenant):
    response = client.post(
        admin_url(DataSource, "add"),
        {"tenant": tenant.pk, "name": "sales", "kind": "postgres", "url": SECRET_URL},
    )
    assert response.status_code == 302
    source = DataSource.objects.get()
    assert data_source_url(data_source=source) == SECRET_URL
    page = client.get(admin_url(DataSource, "change", source.pk)).content.decode()
    assert "Stored encrypted" in page
    assert "s3cr3t" not in page
    assert "db.example" not in page
    assert source.url_encrypted not in page


def test_the_admin_keeps_the_url_when_none_is_entered_and_needs_one_to_add(client, operator, tenant):
    source = data_source_create(tenant=tenant, name="sales", kind="postgres", url=SECRET_URL)
    response = client.post(
        admin_url(DataSource, "change", source.pk),
        {"tenant": tenant.pk, "name": "renamed", "kind": "postgres"},
    )
    assert response.status_code == 302
    source.refresh_from_db()
    assert (source.name, data_source_url(data_source=source)) == ("renamed", SECRET_URL)
    refused = client.post(
        admin_url(DataSource, "add"), {"tenant": tenant.pk, "name": "x", "kind": "postgres"}
    )
    assert refused.status_code == 200
    assert DataSource.objects.count() == 1


# Tenant-scoped lookups


def test_a_ready_ontology_is_found_in_its_own_tenant():
    ontology = OntologyFactory.create()
    assert ontology_get_ready(tenant_id=ontology.tenant_id, ontology_id=str(ontology.pk)) == ontology
    assert list(ontology_list_ready(tenant_id=ontology.tenant_id)) == [ontology]


@pytest.mark.parametrize("case", ["another tenant", "unknown", "creating", "failed", "malformed"])
def test_an_ontology_outside_reach_is_not_found(case):
    ontology = OntologyFactory.create()
    tenant_id, ontology_id = ontology.tenant_id, str(ontology.pk)
    if case == "another tenant":
        tenant_id = TenantFactory.create().pk
    elif case == "unknown":
        ontology_id = str(uuid.uuid4())
    elif case == "malformed":
        ontology_id = "1 OR 1=1"
    else:
        Ontology.objects.filter(pk=ontology.pk).update(status=case)
    with pytest.raises(NotFound, match=ONTOLOGY_NOT_FOUND):
        ontology_get_ready(tenant_id=tenant_id, ontology_id=ontology_id)
    if case in {"creating", "failed"}:
        assert not ontology_list_ready(tenant_id=tenant_id).exists()


def ontology_source_tables(*, ontology: Ontology) -> frozenset[str]:
    # The tables of the ontology's datasets, read straight from the rows, to check what the
    # ontology was built from; the product reads them through ontology_datasets.
    return frozenset(ontology.datasets.values_list("source_table", flat=True))


def test_the_source_tables_are_the_ontology_s_own():
    ontology = OntologyFactory.create()
    DatasetFactory.create(ontology=ontology, name="orders")
    DatasetFactory.create(ontology=ontology, name="customers")
    DatasetFactory.create(name="payroll")
    assert ontology_source_tables(ontology=ontology) == frozenset({"orders", "customers"})


def test_the_admin_action_generates_a_ready_ontology_from_a_sqlite_source(client, operator, tmp_path, tenant):
    database = sample_sqlite_create(path=tmp_path / "sample.sqlite3").url
    source = DataSourceFactory.create(tenant=tenant, kind="sqlite", url=database)
    response = client.post(
        admin_url(DataSource, "changelist"), {"action": "generate_ontology", "_selected_action": [source.pk]}
    )
    assert response.status_code == 302
    ontology = Ontology.objects.get(data_source=source)
    assert ontology.status == OntologyStatus.READY
    assert ontology_source_tables(ontology=ontology) == {
        "regions",
        "customers",
        "products",
        "orders",
        "order_lines",
    }


def test_the_admin_action_reports_a_failure_without_the_credentials(client, operator, tenant):
    source = DataSourceFactory.create(
        tenant=tenant, kind="postgres", url="postgresql://nobody:hunter2-secret@127.0.0.1:1/none"
    )
    response = client.post(
        admin_url(DataSource, "changelist"),
        {"action": "generate_ontology", "_selected_action": [source.pk]},
        follow=True,
    )
    ontology = Ontology.objects.get(data_source=source)
    assert ontology.status == OntologyStatus.FAILED
    assert ontology.status_detail
    assert "hunter2" not in ontology.status_detail
    assert "hunter2" not in response.content.decode()


# The demo's sample database


def test_the_sample_is_a_few_thousand_rows_over_two_years_and_always_the_same():
    rows = sample_rows()
    counts = {table: len(table_rows) for table, table_rows in rows.items()}
    assert counts["regions"] >= 5
    assert counts["products"] >= 20
    assert counts["customers"] >= 300
    assert counts["orders"] >= 2000
    assert counts["order_lines"] >= counts["orders"]
    assert 3000 <= sum(counts.values()) <= 20000
    dates = [order[2] for order in rows["orders"]]
    assert (min(dates), max(dates)) == (FIRST_ORDER_DATE, LAST_ORDER_DATE)
    assert (LAST_ORDER_DATE - FIRST_ORDER_DATE).days >= 2 * 365 - 1
    assert sample_rows() == rows


def test_the_sample_database_on_postgresql_holds_those_rows():
    sample = sample_database_create(tenant_slug="acme")
    expected = {table: len(table_rows) for table, table_rows in sample_rows().items()}
    with psycopg.connect(sample.url) as conn:
        counts = {
            table: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchall()
            for table in expected
        }
        span = conn.execute("SELECT min(order_date), max(order_date) FROM orders").fetchone()
    assert counts == {table: [(count,)] for table, count in expected.items()}
    assert span == (FIRST_ORDER_DATE, LAST_ORDER_DATE)
    assert sample.url.rsplit("/", 1)[1] == f"{connections['default'].settings_dict['NAME']}_sample_acme"


def test_ensuring_the_sample_twice_makes_one_ready_ontology_and_enables_the_toolset(tenant):
    first = sample_database_ensure(tenant=tenant)
    second = sample_database_ensure(tenant=tenant)
    assert first.pk == second.pk
    assert first.status == OntologyStatus.READY, first.status_detail
    assert DataSource.objects.filter(tenant=tenant, name=DATA_SOURCE_NAME).count() == 1
    assert Ontology.objects.filter(tenant=tenant, name=ONTOLOGY_NAME).count() == 1
    assert TenantToolset.objects.get(tenant=tenant, toolset="data_agent").enabled
    datasets = {d.name: d for d in first.datasets.prefetch_related("fields")}
    assert set(datasets) == {"regions", "customers", "products", "orders", "order_lines"}
    assert all(d.description for d in datasets.values())
    assert all(f.description for d in datasets.values() for f in d.fields.all())
    joins = {
        (r.from_field.dataset.name, r.from_field.name, r.to_field.dataset.name, r.to_field.name)
        for r in first.relationships.select_related("from_field__dataset", "to_field__dataset")
    }
    assert joins == {
        ("customers", "region_id", "regions", "id"),
        ("orders", "customer_id", "customers", "id"),
        ("order_lines", "order_id", "orders", "id"),
        ("order_lines", "product_id", "products", "id"),
    }


def test_the_demo_bootstrap_gives_acme_its_sample_ontology(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("bootstrap_demo", verbosity=0)
    ontology = Ontology.objects.get(tenant__slug="acme", name=ONTOLOGY_NAME)
    assert ontology.status == OntologyStatus.READY
    assert TenantToolset.objects.get(tenant__slug="acme", toolset="data_agent").enabled


def _sample_admin(url: str) -> psycopg.Connection:
    """Gatehouse's own credentials on a sample database (the URL's role may only read)."""
    from core.db import psycopg_connect_kwargs

    return psycopg.connect(**{**psycopg_connect_kwargs(), "dbname": url.rsplit("/", 1)[1]})


def _version_on(conn: psycopg.Connection) -> str | None:
    row = conn.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    return row[0] if row else None


def test_a_sample_filled_by_another_version_of_the_data_is_filled_again():
    sample = sample_database_create(tenant_slug="reload")
    with _sample_admin(sample.url) as conn:
        assert _version_on(conn) == sample_version()
        conn.execute("DELETE FROM order_lines WHERE order_id > 10")
        conn.execute(
            sql.SQL("COMMENT ON DATABASE {} IS 'gatehouse-sample 0123'").format(
                sql.Identifier(sample.url.rsplit("/", 1)[1])
            )
        )

    sample_database_create(tenant_slug="reload")

    with _sample_admin(sample.url) as conn:
        assert conn.execute("SELECT count(*) FROM order_lines").fetchone() == (
            len(sample_rows()["order_lines"]),
        )
        assert _version_on(conn) == sample_version()


def test_a_sample_of_this_version_is_left_as_it_is():
    sample = sample_database_create(tenant_slug="kept")
    with _sample_admin(sample.url) as conn:
        conn.execute("INSERT INTO regions (id, name, country) VALUES (999, 'Marker', 'Nowhere')")

    sample_database_create(tenant_slug="kept")

    with _sample_admin(sample.url) as conn:
        assert conn.execute("SELECT name FROM regions WHERE id = 999").fetchone() == ("Marker",)


def test_a_sqlite_sample_of_another_version_is_filled_again_and_of_this_one_kept(tmp_path):
    import sqlite3

    path = tmp_path / "sample.sqlite3"
    sample_sqlite_create(path=path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (sample_sqlite_version(),)
        conn.execute("INSERT INTO regions (id, name, country) VALUES (999, 'Marker', 'Nowhere')")
    sample_sqlite_create(path=path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM regions WHERE id = 999").fetchone() == ("Marker",)
        conn.execute("PRAGMA user_version = 7")
    conn.close()

    sample_sqlite_create(path=path)

    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM regions WHERE id = 999").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (len(sample_rows()["orders"]),)
        assert conn.execute("PRAGMA user_version").fetchone() == (sample_sqlite_version(),)
    conn.close()


def test_a_runs_sample_databases_and_their_reader_roles_are_dropped_with_it():
    # Another run's name: this lane's own samples stay for the tests after this one.
    test_database = f"test_gatehouse_run{uuid.uuid4().hex[:8]}"
    made = [_postgres_sample(name=f"{test_database}_sample_{slug}") for slug in ("acme", "globex")]
    names = sorted(sample.url.rsplit("/", 1)[1] for sample in made)
    other_run = sample_database_create(tenant_slug="acme").url.rsplit("/", 1)[1]

    dropped = sample_databases_drop(test_database=test_database)

    assert dropped == names
    with _sample_admin(f"/{other_run}") as conn:
        left = conn.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", [[*names, other_run]])
        assert left.fetchall() == [(other_run,)]
        roles = conn.execute(
            "SELECT count(*) FROM pg_roles WHERE rolname = ANY(%s)", [[f"{n}_reader" for n in names]]
        )
        assert roles.fetchone() == (0,)


def test_only_a_test_database_s_samples_are_ever_dropped():
    with pytest.raises(ValueError, match="not a test database"):
        sample_databases_drop(test_database="gatehouse")

"""The demo's sample sales database for acme, and the ready ontology that describes it.

On PostgreSQL it is a database of its own (``<default database>_sample_acme``); on the embedded
SQLite default, the file ``.local/sample_acme.sqlite3``. The rows come from a seeded random
generator, so every run builds the same data. A database already filled with this version of the
data is left alone; one filled by another version (a change to the generator, its constants or
the tables) is emptied and filled again, so a sample never describes data the code no longer
makes. The version is kept beside the data, never in a table of its own (the data agent would
read it as part of the sample): PostgreSQL's comment on the database, SQLite's ``user_version``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import logging
import random
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from django.conf import settings
from django.db import connections
from psycopg import sql

from accounts.models import Tenant
from core.db import psycopg_connect_kwargs
from data_agent.models import DataSource, DataSourceKind, Ontology, OntologyStatus
from data_agent.selectors import data_source_url
from data_agent.services import data_source_create, data_source_set_url, ontology_create_from_source
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolset_set_enabled
from mcp_gateway.models import TenantToolset

logger = logging.getLogger(__name__)

SEED = 20241101
FIRST_ORDER_DATE = date(2024, 11, 1)
LAST_ORDER_DATE = date(2026, 10, 31)
CUSTOMER_COUNT = 400
ORDER_COUNT = 2500
DATA_SOURCE_NAME = "Acme sample sales database"
ONTOLOGY_NAME = "Acme sales"
ONTOLOGY_DESCRIPTION = "Acme's orders, the customers who placed them and the products they bought, by region."
SQLITE_FILE = "sample_acme.sqlite3"

# Static DDL, valid on both PostgreSQL and SQLite; no name or value is ever spliced in.
DDL = (
    "CREATE TABLE regions (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL)",
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,"
    " segment TEXT NOT NULL, region_id INTEGER NOT NULL REFERENCES regions (id), signup_date DATE NOT NULL)",
    "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,"
    " unit_price NUMERIC(10, 2) NOT NULL)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers (id),"
    " order_date DATE NOT NULL, status TEXT NOT NULL)",
    "CREATE TABLE order_lines (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders (id),"
    " product_id INTEGER NOT NULL REFERENCES products (id), quantity INTEGER NOT NULL,"
    " unit_price NUMERIC(10, 2) NOT NULL)",
)
INSERTS = {
    "regions": "INSERT INTO regions (id, name, country) VALUES ({})",
    "customers": "INSERT INTO customers (id, name, email, segment, region_id, signup_date) VALUES ({})",
    "products": "INSERT INTO products (id, name, category, unit_price) VALUES ({})",
    "orders": "INSERT INTO orders (id, customer_id, order_date, status) VALUES ({})",
    "order_lines": "INSERT INTO order_lines (id, order_id, product_id, quantity, unit_price) VALUES ({})",
}

DESCRIPTIONS = {
    "regions": "Sales regions; every customer belongs to exactly one.",
    "regions.id": "Region identifier.",
    "regions.name": "Region name, for example North America or Nordics.",
    "regions.country": "The main country the region covers.",
    "customers": "Companies that buy from Acme.",
    "customers.id": "Customer identifier.",
    "customers.name": "Company name.",
    "customers.email": "Purchasing contact's email address.",
    "customers.segment": "Customer size: enterprise, mid-market or small business.",
    "customers.region_id": "The region the customer belongs to.",
    "customers.signup_date": "The day the customer placed its first order or opened its account.",
    "products": "Everything Acme sells, with its current list price.",
    "products.id": "Product identifier.",
    "products.name": "Product name.",
    "products.category": "Product category: anvils, rockets, traps, disguises or gadgets.",
    "products.unit_price": "Current list price in US dollars.",
    "orders": "One row per order a customer placed.",
    "orders.id": "Order identifier.",
    "orders.customer_id": "The customer who placed the order.",
    "orders.order_date": "The day the order was placed.",
    "orders.status": "delivered, shipped, cancelled or returned; revenue counts delivered and shipped.",
    "order_lines": "The products on each order; revenue is quantity times unit price.",
    "order_lines.id": "Order line identifier.",
    "order_lines.order_id": "The order this line belongs to.",
    "order_lines.product_id": "The product ordered.",
    "order_lines.quantity": "How many units were ordered.",
    "order_lines.unit_price": "Price per unit in US dollars when the order was placed.",
}

REGIONS = [
    ("North America", "United States"),
    ("Latin America", "Brazil"),
    ("Western Europe", "France"),
    ("Nordics", "Sweden"),
    ("Asia Pacific", "Japan"),
    ("Oceania", "Australia"),
]
CATEGORIES = {
    "anvils": ["Classic Anvil", "Featherweight Anvil", "Giant Anvil", "Portable Anvil"],
    "rockets": ["Rocket Skates", "Jet-Propelled Pogo Stick", "Rocket Sled", "Booster Rocket", "Rocket Wagon"],
    "traps": ["Bird Seed", "Giant Rubber Band", "Iron Carrot", "Spring-Loaded Boxing Glove", "Trap Door"],
    "disguises": ["Batman Outfit", "Bird Costume", "Tornado Kit", "Fake Rock"],
    "gadgets": ["Dehydrated Boulders", "Earthquake Pills", "Instant Icicle Maker", "Portable Hole", "Magnet"],
}
SEGMENTS = [("enterprise", 1), ("mid-market", 3), ("small business", 6)]
STATUSES = [("delivered", 80), ("shipped", 10), ("cancelled", 6), ("returned", 4)]
NAME_PARTS = (
    ["Apex", "Blue", "Cedar", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Juniper"],
    ["Logistics", "Foods", "Labs", "Works", "Outfitters", "Systems", "Trading", "Studios"],
)


@dataclass(frozen=True)
class SampleDatabase:
    kind: str
    url: str


def sample_rows() -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, the same on every call."""
    rng = random.Random(SEED)  # noqa: S311 (sample data, not secrets: it must be reproducible)
    regions = [(i, name, country) for i, (name, country) in enumerate(REGIONS, start=1)]
    products: list[tuple[Any, ...]] = []
    for category, names in CATEGORIES.items():
        for name in names:
            price = Decimal(rng.randrange(999, 49999)) / 100
            products.append((len(products) + 1, name, category, price))
    span = (LAST_ORDER_DATE - FIRST_ORDER_DATE).days
    customers = []
    for i in range(1, CUSTOMER_COUNT + 1):
        name = f"{rng.choice(NAME_PARTS[0])} {rng.choice(NAME_PARTS[1])} {i}"
        segment = rng.choices([s for s, _ in SEGMENTS], weights=[w for _, w in SEGMENTS])[0]
        signup = FIRST_ORDER_DATE - timedelta(days=rng.randrange(0, 365))
        email = f"buyer{i}@{name.split()[0].lower()}.example"
        customers.append((i, name, email, segment, rng.randrange(1, len(regions) + 1), signup))
    # Both ends of the span are present, so "two years of orders" holds exactly.
    offsets = [0, span] + [rng.randrange(0, span + 1) for _ in range(ORDER_COUNT - 2)]
    orders: list[tuple[Any, ...]] = []
    lines: list[tuple[Any, ...]] = []
    for i, offset in enumerate(sorted(offsets), start=1):
        status = rng.choices([s for s, _ in STATUSES], weights=[w for _, w in STATUSES])[0]
        orders.append(
            (i, rng.randrange(1, CUSTOMER_COUNT + 1), FIRST_ORDER_DATE + timedelta(days=offset), status)
        )
        for product in rng.sample(products, rng.randrange(1, 4)):
            lines.append((len(lines) + 1, i, product[0], rng.randrange(1, 11), product[3]))
    return {
        "regions": regions,
        "customers": customers,
        "products": products,
        "orders": orders,
        "order_lines": lines,
    }


@functools.cache
def sample_version() -> str:
    """A fingerprint of the tables and every row: it changes whenever the sample would."""
    digest = hashlib.sha256()
    digest.update(repr((DDL, INSERTS)).encode())
    for table, rows in sample_rows().items():
        digest.update(repr((table, rows)).encode())
    return f"gatehouse-sample {digest.hexdigest()[:32]}"


def sample_sqlite_version() -> int:
    """The version as SQLite's ``user_version``: a positive 31-bit number."""
    return int(sample_version().rsplit(" ", 1)[1][:8], 16) & 0x7FFFFFFF or 1


# Dependents first, for the DROPs of a sample made by another version.
_TABLES_DROP_ORDER = ("order_lines", "orders", "products", "customers", "regions")


def _fill(
    execute: Callable[[str, Sequence[Any]], Any], executemany: Callable[[str, list[Any]], Any], mark: str
) -> None:
    for table in _TABLES_DROP_ORDER:
        execute(f"DROP TABLE IF EXISTS {table}", ())
    for statement in DDL:
        execute(statement, ())
    for table, rows in sample_rows().items():
        placeholders = ", ".join([mark] * len(rows[0]))
        executemany(INSERTS[table].format(placeholders), rows)


def _postgres_sample(*, name: str) -> SampleDatabase:
    params = psycopg_connect_kwargs()
    with psycopg.connect(**params) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    version = sample_version()
    with psycopg.connect(**{**params, "dbname": name, "autocommit": False}) as conn:
        # Two processes ensuring the sample at once: the second waits, then finds it filled.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('gatehouse sample fill'))")
        stored = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        if stored is None or stored[0] != version:
            # One transaction, the version with the rows: a half-filled sample never counts as filled.
            with conn.cursor() as cursor:
                _fill(cursor.execute, cursor.executemany, "%s")
                _postgres_version_mark(conn, name=name, version=version)
    reader = _reader_role(params=params, database=name)
    user, password = reader or (str(params.get("user") or ""), params.get("password"))
    user = quote(user, safe="")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@"
    host = params.get("host") or "127.0.0.1"
    port = params.get("port") or 5432
    return SampleDatabase(kind=DataSourceKind.POSTGRES, url=f"postgresql://{auth}{host}:{port}/{quote(name)}")


def _postgres_version_mark(conn: psycopg.Connection[Any], *, name: str, version: str) -> None:
    """Only the database's owner may comment on it; a sample database someone else made is filled
    all the same, and filled again at the next start (a warning says why)."""
    try:
        with conn.transaction():
            conn.execute(
                sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(version))
            )
    except psycopg.errors.InsufficientPrivilege:
        logger.warning(
            "Cannot record the sample's version on %s (not its owner); it is refilled at each start", name
        )


CREATE_ROLE = sql.SQL("CREATE ROLE {} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}")
ALTER_ROLE = sql.SQL("ALTER ROLE {} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}")


def _reader_role(*, params: dict[str, Any], database: str) -> tuple[str, str] | None:
    """A login role that may only read the sample's tables, and its password.

    Defence in depth: the gate and the read-only transaction already stop writes, and this role
    could not write even without them. Without the privilege to create roles, the sample falls
    back to Gatehouse's own credentials (a warning says so)."""
    role = f"{database}_reader"[:63]
    # Derived, not random: every run sets the same password, so a URL stored by an earlier run
    # (or rolled back in a test) stays right.
    digest = hmac.new(
        settings.SECRET_KEY.encode(), f"gatehouse sample reader {role}".encode(), hashlib.sha256
    )
    password = base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")
    ident = sql.Identifier(role)
    try:
        with psycopg.connect(**{**params, "dbname": database, "autocommit": True}) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            conn.execute((ALTER_ROLE if exists else CREATE_ROLE).format(ident, sql.Literal(password)))
            conn.execute(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), ident)
            )
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident))
            conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM {}").format(ident))
            conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(ident))
    except psycopg.errors.InsufficientPrivilege:
        logger.warning(
            "Cannot create the read-only role %s; the sample uses Gatehouse's own credentials", role
        )
        return None
    return role, password


def sample_sqlite_create(*, path: Path) -> SampleDatabase:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        version = sample_sqlite_version()
        with conn:
            stored = conn.execute("PRAGMA user_version").fetchone()
            if stored is None or stored[0] != version:
                # SQLite has no DATE or DECIMAL type: dates are ISO text and prices floats.
                conn.execute("PRAGMA foreign_keys = ON")
                _fill(
                    conn.execute,
                    lambda statement, rows: conn.executemany(statement, [_sqlite_row(r) for r in rows]),
                    "?",
                )
                # A PRAGMA takes no parameter; the value is our own integer.
                conn.execute(f"PRAGMA user_version = {int(version)}")
    finally:
        conn.close()
    return SampleDatabase(kind=DataSourceKind.SQLITE, url=f"sqlite:///{path.resolve()}")


def _sqlite_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        v.isoformat() if isinstance(v, date) else float(v) if isinstance(v, Decimal) else v for v in row
    )


def sample_database_create(*, tenant_slug: str) -> SampleDatabase:
    default = connections["default"]
    if default.vendor == "postgresql":
        return _postgres_sample(name=f"{default.settings_dict['NAME']}_sample_{tenant_slug}")
    return sample_sqlite_create(path=Path(settings.LOCAL_DIR) / f"sample_{tenant_slug}.sqlite3")


def sample_database_ensure(*, tenant: Tenant) -> Ontology:
    """The tenant's sample database, its data source, its ready ontology, and the toolset on."""
    database = sample_database_create(tenant_slug=tenant.slug)
    source = DataSource.objects.filter(tenant=tenant, name=DATA_SOURCE_NAME).first()
    if source is None:
        source = data_source_create(
            tenant=tenant, name=DATA_SOURCE_NAME, kind=database.kind, url=database.url
        )
    else:
        if source.kind != database.kind:
            # Moved between SQLite and PostgreSQL: the old ontology describes the other database.
            source.ontologies.all().delete()
            source.kind = database.kind
            source.save(update_fields=["kind", "updated"])
        if _stored_url(source) != database.url:
            source = data_source_set_url(data_source=source, url=database.url)
    ontology = Ontology.objects.filter(tenant=tenant, name=ONTOLOGY_NAME).first()
    if ontology is not None and ontology.status != OntologyStatus.READY:
        ontology.delete()
        ontology = None
    if ontology is None:
        ontology = ontology_create_from_source(
            tenant=tenant,
            data_source=source,
            name=ONTOLOGY_NAME,
            description=ONTOLOGY_DESCRIPTION,
            descriptions=DESCRIPTIONS,
        )
    # Loading the registry imports every toolset (half a second): only when there is something to do.
    if not TenantToolset.objects.filter(tenant=tenant, toolset="data_agent", enabled=True).exists():
        registry = default_registry()
        if registry.toolset("data_agent") is not None:
            toolset_set_enabled(tenant=tenant, toolset="data_agent", enabled=True, registry=registry)
    return ontology


def _stored_url(source: DataSource) -> str | None:
    """The URL stored for the source; None when it cannot be read (stored under another key)."""
    try:
        return data_source_url(data_source=source)
    except ValueError:
        return None

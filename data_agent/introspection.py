"""What a source database holds: tables, columns with their types, and foreign keys.

PostgreSQL is read through ``information_schema`` (foreign keys through ``pg_catalog``) with bound
parameters; SQLite through its table-valued PRAGMA functions (``pragma_table_info(?)``), which take
the table name as a bound parameter too. Both connections are read-only.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg

from data_agent.models import DataSourceKind

POSTGRES_SCHEMA = "public"
CONNECT_TIMEOUT_SECONDS = 10

_PG_TABLES = """
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = %s AND table_type IN ('BASE TABLE', 'VIEW')
    ORDER BY table_name
"""
_PG_COLUMNS = """
    SELECT table_name, column_name, data_type FROM information_schema.columns
    WHERE table_schema = %s
    ORDER BY table_name, ordinal_position
"""
# From pg_catalog, not information_schema: the latter shows constraints only to the tables' owner,
# and a data source should connect as a role that may only read. unnest pairs the columns of a
# multi-column key position by position.
_PG_FOREIGN_KEYS = """
    SELECT src.relname, src_col.attname, dst.relname, dst_col.attname
    FROM pg_catalog.pg_constraint c
    JOIN pg_catalog.pg_class src ON src.oid = c.conrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = src.relnamespace
    JOIN pg_catalog.pg_class dst ON dst.oid = c.confrelid
    CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k(src_attnum, dst_attnum)
    JOIN pg_catalog.pg_attribute src_col ON src_col.attrelid = c.conrelid AND src_col.attnum = k.src_attnum
    JOIN pg_catalog.pg_attribute dst_col ON dst_col.attrelid = c.confrelid AND dst_col.attnum = k.dst_attnum
    WHERE c.contype = 'f' AND n.nspname = %s
    ORDER BY src.relname, src_col.attname
"""


@dataclass(frozen=True)
class ForeignKey:
    column: str
    to_table: str
    to_column: str


@dataclass
class TableInfo:
    name: str
    schema: str = ""
    columns: list[tuple[str, str]] = field(default_factory=list)
    foreign_keys: list[ForeignKey] = field(default_factory=list)


def sqlite_path(*, url: str) -> Path:
    """``sqlite:///absolute/path.sqlite3`` → the file's path."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or not parts.path:
        raise ValueError("A SQLite data source URL looks like sqlite:////absolute/path/file.sqlite3")
    return Path(unquote(parts.path))


def sqlite_connect_read_only(*, url: str) -> sqlite3.Connection:
    path = sqlite_path(url=url)
    if not path.is_file():
        raise ValueError("The SQLite file does not exist.")
    return sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)


def schema_read(*, kind: str, url: str) -> list[TableInfo]:
    if kind == DataSourceKind.POSTGRES:
        return _postgres_schema(url=url)
    if kind == DataSourceKind.SQLITE:
        return _sqlite_schema(url=url)
    raise ValueError(f"Unknown data source kind {kind!r}.")


def _postgres_schema(*, url: str) -> list[TableInfo]:
    with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
        conn.read_only = True
        tables = {
            name: TableInfo(name=name, schema=POSTGRES_SCHEMA)
            for (name,) in conn.execute(_PG_TABLES, [POSTGRES_SCHEMA]).fetchall()
        }
        for table, column, data_type in conn.execute(_PG_COLUMNS, [POSTGRES_SCHEMA]).fetchall():
            if table in tables:
                tables[table].columns.append((column, data_type))
        for table, column, to_table, to_column in conn.execute(
            _PG_FOREIGN_KEYS, [POSTGRES_SCHEMA]
        ).fetchall():
            if table in tables:
                tables[table].foreign_keys.append(ForeignKey(column, to_table, to_column))
    return list(tables.values())


def _sqlite_schema(*, url: str) -> list[TableInfo]:
    conn = sqlite_connect_read_only(url=url)
    try:
        names = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        result = []
        for name in names:
            info = TableInfo(name=name)
            for column, data_type in conn.execute("SELECT name, type FROM pragma_table_info(?)", [name]):
                info.columns.append((column, (data_type or "").lower()))
            for to_table, column, to_column in conn.execute(
                'SELECT "table", "from", "to" FROM pragma_foreign_key_list(?)', [name]
            ):
                info.foreign_keys.append(ForeignKey(column, to_table, to_column or "id"))
            result.append(info)
        return result
    finally:
        conn.close()

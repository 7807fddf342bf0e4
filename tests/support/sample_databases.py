"""The demo's sample databases a test run made, removed when it ends.

``data_agent.sample`` makes ``<database>_sample_<tenant>`` beside the test database (and a reader
role for each), and PostgreSQL keeps them after pytest-django drops the test database itself. A
run removes exactly those of its own test database, so two runs on other databases (the lanes of
``make test``) never remove each other's."""

from __future__ import annotations

import psycopg
from psycopg import sql

from core.db import psycopg_connect_kwargs


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")


def sample_databases_drop(*, test_database: str) -> list[str]:
    """Drop ``<test_database>_sample_*`` and their reader roles; the names dropped, sorted."""
    if not test_database.startswith("test_"):
        raise ValueError(f"not a test database: {test_database!r}")
    params = {**psycopg_connect_kwargs(), "dbname": "postgres", "autocommit": True}
    pattern = _like_escaped(f"{test_database}_sample_") + "%"
    with psycopg.connect(**params) as conn:
        names = sorted(
            row[0]
            for row in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", [pattern]
            ).fetchall()
        )
        for name in names:
            # A server process of the run may still hold a connection.
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(f"{name}_reader"[:63])))
    return names

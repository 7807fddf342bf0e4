"""A transactional test's clean-up in milliseconds instead of half a second.

After each ``transaction=True`` test (and each ``live_server`` test) Django empties every table with
one ``TRUNCATE`` of all of them, which costs PostgreSQL a new file per table, then re-creates the
content types and permissions it has just removed (the ``post_migrate`` signal). Our suite has
hundreds of such tests. Here, on PostgreSQL and for a superuser (the suite's default), the tables
are emptied with ``DELETE`` instead, content types and permissions kept, and ``post_migrate``
skipped as nothing it creates was removed. ``session_replication_role = replica`` for the
clean-up's transaction keeps what ``TRUNCATE`` kept: no row triggers fire (no ``NOTIFY`` reaches a
test server, no change-log row is written) and foreign keys are not checked, so the order of the
deletes does not matter. Sequences are left as they are, as ``TRUNCATE`` without ``RESTART
IDENTITY`` leaves them. Anything else (another database, a test that resets sequences, a role that
may not switch replication roles) gets Django's own flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.management.commands import flush as flush_command
from django.db.backends.postgresql.operations import DatabaseOperations

# Rows that only migrations and post_migrate write, which no test changes.
KEPT_TABLES = frozenset({"django_content_type", "auth_permission", "django_migrations"})

_django_sql_flush = DatabaseOperations.sql_flush
# flush imports it by name; the stubs do not declare that import.
_django_emit_post_migrate = getattr(flush_command, "emit_post_migrate_signal")  # noqa: B009
_superuser: dict[str, bool] = {}
# The databases whose last flush kept content types and permissions: their post_migrate is skipped.
_kept: set[str] = set()


def _is_superuser(ops: DatabaseOperations) -> bool:
    alias = ops.connection.alias
    if alias not in _superuser:
        with ops.connection.cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            row = cursor.fetchone()
        _superuser[alias] = bool(row and row[0])
    return _superuser[alias]


def _sql_flush(
    self: DatabaseOperations,
    style: Any,
    tables: Sequence[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    _kept.discard(self.connection.alias)
    if reset_sequences or not tables or not _is_superuser(self):
        return _django_sql_flush(
            self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    _kept.add(self.connection.alias)
    statements = ["SET LOCAL session_replication_role = replica;"]
    # Table names from Django's own introspection, quoted.
    statements += [
        f"DELETE FROM {self.quote_name(table)};"  # noqa: S608
        for table in tables
        if table not in KEPT_TABLES
    ]
    return statements


def _emit_post_migrate(verbosity: int, interactive: bool, db: str, **kwargs: Any) -> None:
    if db in _kept:
        _kept.discard(db)
        return
    _django_emit_post_migrate(verbosity, interactive, db, **kwargs)


def fast_flush_install() -> None:
    """Use the clean-up above for the rest of this process (a test run; never the product)."""
    DatabaseOperations.sql_flush = _sql_flush  # type: ignore[method-assign,assignment]
    setattr(flush_command, "emit_post_migrate_signal", _emit_post_migrate)  # noqa: B010

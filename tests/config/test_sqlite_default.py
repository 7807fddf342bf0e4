"""The embedded SQLite database (`make run` without DATABASE_URL) under concurrent writers.

Daphne runs each request's view in a thread of its own, each on its own SQLite connection. Found by
the fresh-clone test (tests/fresh_clone): in SQLite's default DEFERRED mode, a transaction that
reads and then writes while another does the same fails at once with "database is locked" (ten
parallel refreshes of one token: nine 500s). The suite runs on PostgreSQL, so this runs a process of
its own on a SQLite file.
"""

from __future__ import annotations

import json

from tests.support.python_process import python_run

# Four threads, each one transaction that reads a counter, waits, and writes it back plus one.
READ_THEN_WRITE = """
import json, threading, time
import django
django.setup()
from django.conf import settings
from django.db import connection, transaction

with connection.cursor() as cursor:
    cursor.execute("CREATE TABLE counter (n integer)")
    cursor.execute("INSERT INTO counter VALUES (0)")
errors = []

def bump():
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT n FROM counter")
            n = cursor.fetchone()[0]
            time.sleep(0.2)
            cursor.execute("UPDATE counter SET n = %s", [n + 1])
    except Exception as error:
        errors.append(f"{type(error).__name__}: {error}")
    finally:
        connection.close()

threads = [threading.Thread(target=bump) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with connection.cursor() as cursor:
    cursor.execute("SELECT n FROM counter")
    count = cursor.fetchone()[0]
print(json.dumps({"count": count, "errors": errors, "silenced": settings.SILENCED_SYSTEM_CHECKS}))
"""


def _run(tmp_path, database_url: str) -> dict:
    done = python_run(
        ["-c", READ_THEN_WRITE],
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": "sqlite-test-secret",
            "DATABASE_URL": database_url,
        },
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_concurrent_read_then_write_transactions_wait_their_turn_instead_of_failing(tmp_path):
    outcome = _run(tmp_path, f"sqlite:///{tmp_path / 'gatehouse.sqlite3'}")
    assert outcome["errors"] == []
    # Each transaction saw the one before it: none wrote over another's increment.
    assert outcome["count"] == 4


def test_a_sqlite_database_url_gets_the_embedded_defaults_own_silenced_check(tmp_path):
    # RateLimitRule's constraint SQLite cannot enforce, whether the file is the default or named.
    outcome = _run(tmp_path, f"sqlite:///{tmp_path / 'named.sqlite3'}")
    assert "models.W047" in outcome["silenced"]

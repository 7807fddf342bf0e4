"""A fresh Python process in the project's directory, for what only a new process shows: settings
read at start, import-time behaviour, ``manage.py`` commands."""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings
from django.db import connection


def python_run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """This interpreter with ``args`` (``["manage.py", ...]`` or ``["-c", code]``), output captured."""
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=settings.BASE_DIR,
    )


def committed_database_url() -> str:
    """The test database as a ``DATABASE_URL``, for a process of its own to reach what the test
    committed."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{db.get('USER') or 'postgres'}{password}@{host}:{port}/{db['NAME']}"

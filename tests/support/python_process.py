"""A fresh Python process in the project's directory, for what only a new process shows: settings
read at start, import-time behaviour, ``manage.py`` commands."""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings


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

"""`manage.py` finds the development key `make run` generated in .local/, so the documented commands
(`createsuperuser`, `changepassword`, ...) work as written; production still refuses to start
without a real SECRET_KEY.

Settings are read once per process, so each case is a fresh Python process.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from tests.support.python_process import python_run

_PRINT_KEY = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
REFUSAL = "SECRET_KEY (or SECRET_KEY_FILE) is required"


@pytest.fixture
def development_key() -> Iterator[str]:
    """The checkout's .local/secret_key: the one `make run` made, else one made here and removed after."""
    path = Path(settings.DEVELOPMENT_SECRET_KEY_FILE)
    if path.exists():
        yield path.read_text(encoding="utf-8").strip()
        return
    path.parent.mkdir(exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key + "\n", encoding="utf-8")
    try:
        yield key
    finally:
        path.unlink(missing_ok=True)


def _userinfo(db: dict[str, Any]) -> str:
    password = db.get("PASSWORD") or ""
    return quote(db["USER"], safe="") + (f":{quote(password, safe='')}" if password else "")


def _env(**overrides: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"SECRET_KEY", "SECRET_KEY_FILE", "PUBLIC_URL", "DEBUG", "ALLOWED_HOSTS"}
    }
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env.update(overrides)
    return env


@pytest.mark.parametrize(
    "public_url", [None, "http://127.0.0.1:8123", "http://localhost:8000", "http://[::1]:8000"]
)
def test_a_loopback_development_setup_uses_the_generated_key(development_key, public_url):
    env = _env() if public_url is None else _env(PUBLIC_URL=public_url)

    result = python_run(["-c", _PRINT_KEY], env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == development_key


def test_the_documented_manage_py_commands_start_without_the_makefile(development_key):
    for command in (["check"], ["createsuperuser", "--help"], ["changepassword", "--help"]):
        result = python_run(["manage.py", *command], _env())

        assert result.returncode == 0, (command, result.stderr)
        assert REFUSAL not in result.stderr


def test_a_given_secret_key_wins_over_the_generated_one(development_key):
    result = python_run(["-c", _PRINT_KEY], _env(SECRET_KEY="given-" + secrets.token_urlsafe(40)))

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("given-")


@pytest.mark.parametrize(
    "public_url", ["https://mcp.example.com", "http://mcp.example.com", "https://127.0.0.1:8443"]
)
def test_anything_but_loopback_http_still_needs_a_real_key(development_key, public_url):
    result = python_run(["-c", _PRINT_KEY], _env(PUBLIC_URL=public_url))

    assert result.returncode != 0
    assert REFUSAL in result.stderr
    assert development_key not in result.stdout + result.stderr


@pytest.mark.django_db
def test_createsuperuser_works_as_the_banner_shows_it(development_key):
    # The test database, which the subprocess sees committed rows of (migrations, its own writes).
    db = connection.settings_dict
    env = _env(
        DATABASE_URL=f"postgres://{_userinfo(db)}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        DJANGO_SUPERUSER_PASSWORD="Operator-" + secrets.token_urlsafe(12),
    )
    username = "operator-" + secrets.token_hex(4)
    try:
        created = python_run(
            [
                "manage.py",
                "createsuperuser",
                "--noinput",
                "--username",
                username,
                "--email",
                "op@example.com",
            ],
            env,
        )
        assert created.returncode == 0, created.stderr
        assert "Superuser created successfully." in created.stdout
        listed = python_run(["manage.py", "purge_unused_clients", "--dry-run"], env)
        assert listed.returncode == 0, listed.stderr
    finally:
        python_run(
            [
                "manage.py",
                "shell",
                "-c",
                f"from accounts.models import User; User.objects.filter(username={username!r}).delete()",
            ],
            env,
        )

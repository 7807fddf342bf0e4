"""`make run` stops before migrating, with one line that says what is wrong and how to fix it, when
the database in DATABASE_URL does not answer or the port is taken; and then no server starts.

Each case is a fresh process (`manage.py preflight`, and `make run` itself), as a newcomer runs it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator

import pytest
from django.conf import settings

from tests.support.python_process import python_run

LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _env(**overrides: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "PORT"}}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env.update(overrides)
    return env


def _preflight(*, database_url: str, port: int) -> subprocess.CompletedProcess[str]:
    return python_run(["manage.py", "preflight"], _env(DATABASE_URL=database_url, PORT=str(port)))


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_it_passes_when_the_port_is_free_and_the_database_answers():
    result = _preflight(database_url=f"{LOCAL_POSTGRES}/postgres", port=_free_port())

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_a_database_that_does_not_exist_is_named_with_how_to_create_it():
    line = _one_line(_preflight(database_url=f"{LOCAL_POSTGRES}/gh_no_such_database", port=_free_port()))

    assert '"gh_no_such_database" does not exist' in line
    assert "createdb" in line
    assert "DATABASE_URL" in line


def test_a_refused_connection_names_the_host_and_port():
    line = _one_line(_preflight(database_url="postgres://postgres@127.0.0.1:1/gatehouse", port=_free_port()))

    assert "127.0.0.1:1" in line
    assert "refused" in line
    assert "DATABASE_URL" in line


def test_an_unknown_host_is_named():
    line = _one_line(
        _preflight(database_url="postgres://postgres@no-such-host.invalid/gatehouse", port=_free_port())
    )

    assert '"no-such-host.invalid" is not known' in line
    assert "DATABASE_URL" in line


def test_a_busy_port_is_named_with_the_port_variable_before_the_database_is_tried(busy_port):
    # The database is unreachable too: the port is checked first, before anything is migrated.
    line = _one_line(_preflight(database_url="postgres://postgres@127.0.0.1:1/gatehouse", port=busy_port))

    assert f"Port {busy_port} is already in use" in line
    assert "PORT=" in line


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_stops_on_a_bad_database_and_starts_no_server():
    port = _free_port()
    # -o: the virtualenv counts as installed, so the test never reinstalls it.
    process = subprocess.Popen(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "run", f"PORT={port}"],
        cwd=settings.BASE_DIR,
        env=_env(DATABASE_URL=f"{LOCAL_POSTGRES}/gh_no_such_database"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        # Before the fix Daphne started anyway and never returned.
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate()
        pytest.fail("make run started a server despite the missing database")

    assert process.returncode != 0
    assert "Traceback" not in stderr
    ours = [line for line in stderr.strip().splitlines() if not line.startswith("make")]
    assert len(ours) == 1, stderr
    assert '"gh_no_such_database" does not exist' in ours[0]
    assert "Gatehouse is starting" not in stdout
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(
    "database_url", ["nonsense", "postgres://postgres@127.0.0.1:99999/x", "mysql://u@127.0.0.1/x"]
)
def test_a_database_url_gatehouse_cannot_use_is_refused_with_its_shape(database_url):
    # Refused while the settings load, so Django's traceback comes first; its last line is ours.
    result = _preflight(database_url=database_url, port=_free_port())

    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "DATABASE_URL" in last
    assert "postgres://" in last

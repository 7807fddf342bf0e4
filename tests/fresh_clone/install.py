"""The clone one test module shares: its `make run`s, what the first one left, its manage.py."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fresh_clone.make_run import FileStamp, MakeRun, newcomer_env
from tests.fresh_clone.terminal import run_with_tty

# A cold start includes the virtualenv's full pip install (about 70 s with pip's cache, minutes on
# a busy machine).
COLD_START_LIMIT_SECONDS = 1200
WARM_START_LIMIT_SECONDS = 300
COMMAND_TIMEOUT_SECONDS = 120
ARTIFACTS_DIR = os.environ.get("GATEHOUSE_ARTIFACTS_DIR")


@dataclass
class FreshInstall:
    """The clone, the `make run` serving now, and what its first run left behind."""

    directory: Path
    port: int
    logs: Path
    password: str = ""
    venv_stamp: FileStamp | None = None
    python_stamp: FileStamp | None = None
    database_stamp: FileStamp | None = None
    secret_key: str = ""
    runs: list[MakeRun] = field(default_factory=list)

    @property
    def database(self) -> Path:
        return self.directory / ".local" / "gatehouse.sqlite3"

    @property
    def current(self) -> MakeRun:
        return self.runs[-1]

    def make_run(self, label: str, *, port: int | None = None, **env: str) -> MakeRun:
        run = MakeRun(
            directory=self.directory,
            port=port or self.port,
            log_path=self.logs / f"{len(self.runs) + 1:02d}-{label}.log",
            env=newcomer_env(**env),
        )
        self.runs.append(run)
        run.start()
        return run

    def serving(self) -> MakeRun:
        """The server `make run` started; started again if a test left it stopped."""
        for run in reversed(self.runs):
            if run.port == self.port and run.running():
                return run
        run = self.make_run("restarted")
        run.wait_healthy(timeout=WARM_START_LIMIT_SECONDS)
        return run

    def manage(self, *args: str, **env: str) -> tuple[int, str, str]:
        """`.venv/bin/python manage.py ...` in the clone, as the README writes it."""
        done = subprocess.run(
            [".venv/bin/python", "manage.py", *args],
            cwd=self.directory,
            env=newcomer_env(**env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr

    def manage_at_a_terminal(self, args: list[str], dialogue: list[tuple[str, str]]) -> tuple[int, str]:
        """The same for a command that asks at a terminal: each (prompt, answer) in turn."""
        return run_with_tty(
            [".venv/bin/python", "manage.py", *args],
            cwd=self.directory,
            env=newcomer_env(),
            dialogue=dialogue,
            timeout=COMMAND_TIMEOUT_SECONDS,
        )


def report(request: pytest.FixtureRequest, line: str) -> None:
    """A figure for the person reading the run, whether the test passes or not."""
    line = f"[make run, fresh clone] {line}"
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line, file=sys.stderr)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        reporter.write_line(line)

"""The fresh clone and its first `make run`, made once for the module's tests (in any order)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fresh_clone.install import ARTIFACTS_DIR, COLD_START_LIMIT_SECONDS, FreshInstall, report
from tests.fresh_clone.make_run import FileStamp, banner_password, clone_head, free_port


@pytest.fixture(scope="module")
def fresh(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FreshInstall]:
    """A clone of HEAD, and its first `make run` serving: virtualenv, migrations, demo, Daphne."""
    root = tmp_path_factory.mktemp("fresh-clone")
    logs = root / "logs"
    logs.mkdir()
    install = FreshInstall(directory=root / "gatehouse", port=free_port(), logs=logs)
    failures_before = request.session.testsfailed
    ready = False
    try:
        head = clone_head(into=install.directory)
        assert not (install.directory / ".venv").exists()
        first = install.make_run("cold")
        cold = first.wait_healthy(
            timeout=COLD_START_LIMIT_SECONDS, watch=install.directory / ".venv" / ".installed"
        )
        output = first.output()
        password = banner_password(output)
        assert password, f"the banner printed no password:\n{output[-4000:]}"
        install.password = password
        install.venv_stamp = FileStamp.of(install.directory / ".venv" / ".installed")
        install.python_stamp = FileStamp.of(install.directory / ".venv" / "bin" / "python")
        install.database_stamp = FileStamp.of(install.database)
        install.secret_key = (install.directory / ".local" / "secret_key").read_text()
        report(
            request,
            f"clone of {head[:10]}: virtualenv made in {first.figures.get('watched_seconds', 0):.1f} s, "
            f"cold start to /health {cold:.1f} s",
        )
        ready = True
        yield install
    finally:
        for run in install.runs:
            run.stop()
        # A setup that failed here is reported only after this block: it counts as a failure too.
        if ARTIFACTS_DIR and (not ready or request.session.testsfailed > failures_before):
            kept = Path(ARTIFACTS_DIR) / "fresh-clone"
            kept.mkdir(parents=True, exist_ok=True)
            for log in logs.iterdir():
                shutil.copy(log, kept / log.name)
        # The clone with its virtualenv is most of a gigabyte; its logs went to the artifacts.
        shutil.rmtree(install.directory, ignore_errors=True)

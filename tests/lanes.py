"""`make test` and `make check`: the suite's lanes side by side, each on its own database.

The end-to-end tests spend much of their time waiting for the processes they start, so they run in
two lanes (halves by folder) with the in-process tests (and lint, types and the migration check)
beside them. Each pytest lane gets a test database of its own (pytest-django's ``test_<name>``,
from ``DATABASE_URL`` with a suffix) and a Redis database of its own (``TEST_REDIS_URL``;
rate-limit keys carry a random prefix besides), so no lane sees another's rows.

Each lane writes its whole output to ``$GATEHOUSE_ARTIFACTS_DIR/lanes/<lane>.log``. When all have
ended, their logs are printed one after the other, then each pytest lane's 25 slowest tests and
closing line, and last one line that adds the lanes up: ``lanes: N passed, M failed``. The exit
status is 1 if any lane failed.

    python -m tests.lanes                    # static, in-process, both end-to-end halves (make test)
    python -m tests.lanes --check            # static and in-process only (make check)
    python -m tests.lanes -- -x --lf         # pytest's own arguments after --
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/gatehouse"
DEFAULT_REDIS = "redis://127.0.0.1:6379"
# The halves' names, as tests/conftest.py's --e2e-half takes them.
E2E_HALVES = ("first", "second")
MAX_CHECK_WORKERS = 4
# pytest's closing line: "=== 12 failed, 3790 passed, 2 errors in 812.40s (0:13:32) ==="
_SUMMARY = re.compile(r"^=+ (?P<body>.*\d+ (?:passed|failed|error|errors|skipped|deselected).*) in [\d.]+s")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


@dataclass
class Lane:
    name: str
    commands: list[list[str]]
    env: dict[str, str] = field(default_factory=dict)
    pytest: bool = False
    log_path: Path = Path()
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float = 0.0
    status: int | None = None


def _lane_database_url(base: str, suffix: str) -> str:
    parts = urlsplit(base)
    name = parts.path.lstrip("/") or "gatehouse"
    return urlunsplit(parts._replace(path=f"/{name}_{suffix}"))


def _pytest(marker: str, extra: list[str]) -> list[str]:
    return [str(VENV_BIN / "pytest"), "-m", marker, "-p", "no:cacheprovider", *extra]


def lanes_plan(*, check_only: bool, pytest_args: list[str]) -> list[Lane]:
    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    static = Lane(
        name="static",
        commands=[
            [str(VENV_BIN / "ruff"), "check", "."],
            [str(VENV_BIN / "ruff"), "format", "--check", "."],
            [str(VENV_BIN / "lint-imports"), "--no-cache"],
            [str(VENV_BIN / "mypy"), "."],
            [
                sys.executable,
                "-W",
                "ignore::RuntimeWarning",
                "manage.py",
                "makemigrations",
                "--check",
                "--dry-run",
            ],
        ],
        # manage.py and mypy read the product's settings; no database is touched.
        env={"SECRET_KEY": os.environ.get("SECRET_KEY", "test-only-secret"), "DATABASE_URL": database_url},
    )
    # Alone (make check) the in-process tests leave a core idle while they wait on the processes and
    # sockets some of them start: pytest-xdist runs them on as many workers as there are cores (at
    # most four; past two they compete for CPU). Beside the end-to-end lane (make test) that core is
    # already busy, and extra workers only add a test database each.
    parallel = ["-n", "auto", "--maxprocesses", str(MAX_CHECK_WORKERS)] if check_only else []
    in_process = Lane(
        name="in-process",
        commands=[_pytest("not e2e", [*parallel, *pytest_args])],
        env={
            "DATABASE_URL": _lane_database_url(database_url, "inprocess"),
            "TEST_REDIS_URL": f"{DEFAULT_REDIS}/1",
        },
        pytest=True,
    )
    lanes = [static, in_process]
    if not check_only:
        # Two end-to-end lanes, split by folder (tests/conftest.py's E2E_FIRST_HALF): the
        # end-to-end tests wait on the processes they start more than they compute, and one lane
        # of them alone was the whole run's critical path.
        for number, half in enumerate(E2E_HALVES, start=2):
            lanes.append(
                Lane(
                    name=f"e2e-{half}",
                    commands=[_pytest("e2e", ["--e2e-half", half, *pytest_args])],
                    env={
                        "DATABASE_URL": _lane_database_url(database_url, f"e2e_{half}"),
                        "TEST_REDIS_URL": f"{DEFAULT_REDIS}/{number}",
                    },
                    pytest=True,
                )
            )
    return lanes


def _script(lane: Lane) -> str:
    """One shell line that runs the lane's commands in turn, each announced, and fails if any did."""
    parts = []
    for command in lane.commands:
        quoted = " ".join(_quote(arg) for arg in command)
        parts.append(f"echo '$ {quoted}'; {quoted} || status=1")
    return "status=0; " + "; ".join(parts) + "; exit $status"


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'" if re.search(r"[^\w@%+=:,./-]", arg) else arg


def lane_start(lane: Lane, *, logs_dir: Path) -> None:
    lane.log_path = logs_dir / f"{lane.name}.log"
    lane.started = time.monotonic()
    lane.process = subprocess.Popen(
        ["bash", "-c", _script(lane)],
        cwd=BASE_DIR,
        env={**os.environ, **lane.env},
        stdout=lane.log_path.open("wb"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def pytest_counts(log: str) -> dict[str, int]:
    """The closing line's counts, or an empty dict when pytest never got that far."""
    for line in reversed(log.splitlines()):
        match = _SUMMARY.match(line)
        if match:
            counts: dict[str, int] = {}
            for number, word in _COUNT.findall(match["body"]):
                key = "errors" if word.startswith("error") else word
                counts[key] = counts.get(key, 0) + int(number)
            return counts
    return {}


def _slowest(log: str) -> str:
    match = re.search(r"^=+ slowest \d+ durations =+$.*?(?=^=+ )", log, re.MULTILINE | re.DOTALL)
    return match.group(0).rstrip() if match else "(no durations: pytest did not finish)"


def _closing(log: str) -> str:
    for line in reversed(log.splitlines()):
        if _SUMMARY.match(line):
            return line
    return "(no closing line)"


# Each end-to-end lane's servers hold up to about 65 connections at once, beside the in-process lane's.
CONNECTIONS_NEEDED = 200


def _connections_warn() -> None:
    """Say so at the start, not as 'too many clients' failures half-way (.ci/run raises it)."""
    server = urlunsplit(
        urlsplit(os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL)._replace(path="/postgres")
    )
    shown = subprocess.run(
        ["psql", server, "-Atc", "SHOW max_connections"],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode == 0 and shown.stdout.strip().isdigit() and int(shown.stdout) < CONNECTIONS_NEEDED:
        print(
            f"warning: PostgreSQL's max_connections is {shown.stdout.strip()}; the lanes need about "
            f"{CONNECTIONS_NEEDED} (ALTER SYSTEM SET max_connections = 300, then restart PostgreSQL; "
            ".ci/run does it)",
            flush=True,
        )


def lanes_arguments(argv: list[str] | None) -> argparse.Namespace:
    """``--check``, then pytest's own arguments after ``--`` (so ``-x`` or ``--durations=0`` reach
    pytest rather than this parser; the Makefile always writes the ``--``)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="static and in-process lanes only")
    parser.add_argument("pytest_args", nargs="*", help="passed on to every pytest lane, after --")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = lanes_arguments(argv)

    artifacts = Path(os.environ.get("GATEHOUSE_ARTIFACTS_DIR") or BASE_DIR / ".ci" / "artifacts")
    logs_dir = artifacts / "lanes"
    logs_dir.mkdir(parents=True, exist_ok=True)
    (logs_dir / "closing.txt").unlink(missing_ok=True)
    lanes = lanes_plan(check_only=args.check, pytest_args=args.pytest_args)
    if not args.check:
        _connections_warn()
    started = time.monotonic()
    for lane in lanes:
        lane_start(lane, logs_dir=logs_dir)
        print(f"lane {lane.name}: started, output in {lane.log_path}", flush=True)
    try:
        pending = list(lanes)
        while pending:
            for lane in list(pending):
                assert lane.process is not None
                if lane.process.poll() is not None:
                    lane.status = lane.process.returncode
                    lane.seconds = time.monotonic() - lane.started
                    pending.remove(lane)
                    verdict = "passed" if lane.status == 0 else f"FAILED (exit {lane.status})"
                    print(f"lane {lane.name}: {verdict} in {lane.seconds:.0f} s", flush=True)
            time.sleep(0.5)
    except KeyboardInterrupt:
        for lane in lanes:
            if lane.process is not None and lane.process.poll() is None:
                lane.process.terminate()
        raise

    totals = {"passed": 0, "failed": 0}
    for lane in lanes:
        log = lane.log_path.read_text(errors="replace")
        print(f"\n{'#' * 30} lane {lane.name}: the whole log {'#' * 30}\n{log}", flush=True)
    print(f"\n{'#' * 30} summaries {'#' * 30}")
    for lane in lanes:
        verdict = "passed" if lane.status == 0 else f"FAILED (exit {lane.status})"
        print(f"\nlane {lane.name}: {verdict} in {lane.seconds:.0f} s")
        if lane.pytest:
            log = lane.log_path.read_text(errors="replace")
            print(_slowest(log))
            print(_closing(log))
            counts = pytest_counts(log)
            totals["passed"] += counts.get("passed", 0)
            # A lane that failed without a closing line (a crash, a collection error) counts as one.
            failed = counts.get("failed", 0) + counts.get("errors", 0)
            totals["failed"] += failed if counts or lane.status == 0 else 1
    print(f"\nwall time: {time.monotonic() - started:.0f} s")
    failed_lanes = [lane.name for lane in lanes if lane.status != 0]
    if failed_lanes:
        print(f"failed lanes: {', '.join(failed_lanes)}")
    closing = f"lanes: {totals['passed']} passed, {totals['failed']} failed"
    print(closing)
    # .ci/run prints it again as the very last line of its log, after the topology figures.
    (logs_dir / "closing.txt").write_text(closing + "\n")
    return 1 if failed_lanes else 0


if __name__ == "__main__":
    sys.exit(main())

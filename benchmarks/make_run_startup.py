"""How long `make run` takes until the server answers ``/health``: the first run in a fresh copy of
the working tree (cold: nothing migrated, collected or created yet) and the restarts after it (warm).

``python benchmarks/make_run_startup.py`` runs it on the embedded SQLite default;
``--database-url postgres://postgres@127.0.0.1:5432/gatehouse_bench_startup`` on PostgreSQL (that
database, its sample database and the sample's reader role are dropped before and after). The
copy holds the tracked and untracked files of this working tree (not .local/ nor .venv/), and
borrows this checkout's installed ``.venv`` (``make -o .venv/.installed``; ``--venv PATH`` another,
such as one with only ``pip install -e .``), so installing is not part of the figure. Each run also
asks for the sign-in page and a collected stylesheet. Figures are printed, not judged.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from bench_support import BASE_DIR, free_port
from psycopg import sql

HEALTH_TIMEOUT_SECONDS = 300


def working_tree_copy(*, into: Path, venv: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=BASE_DIR,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = BASE_DIR / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    (into / ".venv").symlink_to(venv.resolve())


def drop_databases(database_url: str, *, create_again: bool) -> None:
    """The benchmark's database, the demo's sample database beside it and the sample's reader role."""
    name = urlsplit(database_url).path.lstrip("/")
    admin = database_url.replace(f"/{name}", "/postgres", 1)
    sample = f"{name}_sample_acme"
    with psycopg.connect(admin, autocommit=True) as conn:
        for database in (name, sample):
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(f"{sample}_reader"[:63])))
        if create_again:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def answers(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def one_run(*, clone: Path, env: dict[str, str]) -> tuple[float, str]:
    """Seconds from `make run` to a 200 from /health, and what make printed before it."""
    port = free_port()
    started = time.monotonic()
    process = subprocess.Popen(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "run", f"PORT={port}"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        while not answers(port, "/health"):
            if process.poll() is not None:
                raise RuntimeError(f"make run exited with {process.returncode}: {process.communicate()[0]}")
            if time.monotonic() - started > HEALTH_TIMEOUT_SECONDS:
                raise RuntimeError("make run did not answer /health in time")
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        # What a person opens next: the sign-in page and the admin's stylesheet (collected).
        for path in ("/accounts/login/", "/static/admin/css/base.css"):
            if not answers(port, path):
                raise RuntimeError(f"{path} did not answer 200")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        output = process.communicate(timeout=60)[0]
    return elapsed, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a PostgreSQL database to create and drop (default: SQLite)")
    parser.add_argument("--warm-runs", type=int, default=2)
    parser.add_argument("--show-output", action="store_true", help="print what each make run printed")
    parser.add_argument(
        "--venv",
        type=Path,
        default=BASE_DIR / ".venv",
        help="an installed virtualenv to borrow (default: .venv)",
    )
    args = parser.parse_args()

    removed = {"DATABASE_URL", "DEMO_PASSWORD", "SECRET_KEY", "SECRET_KEY_FILE", "PORT", "PUBLIC_URL"}
    env = {key: value for key, value in os.environ.items() if key not in removed}
    if args.database_url:
        env["DATABASE_URL"] = args.database_url
        drop_databases(args.database_url, create_again=True)
    with tempfile.TemporaryDirectory(prefix="gatehouse-make-run-") as folder:
        clone = Path(folder)
        working_tree_copy(into=clone, venv=args.venv)
        figures = []
        try:
            for _ in range(1 + args.warm_runs):
                elapsed, output = one_run(clone=clone, env=env)
                figures.append(elapsed)
                if args.show_output:
                    print(output, file=sys.stderr)
        finally:
            if args.database_url:
                drop_databases(args.database_url, create_again=False)
    database = "PostgreSQL" if args.database_url else "SQLite"
    print(f"make run until /health answers ({database}, venv installed):")
    print(f"  cold (fresh copy):  {figures[0]:6.1f} s")
    for index, elapsed in enumerate(figures[1:], start=1):
        print(f"  warm restart {index}:     {elapsed:6.1f} s")
    if len(figures) > 2:
        print(f"  warm, median:       {statistics.median(figures[1:]):6.1f} s")


if __name__ == "__main__":
    main()

"""Flame graphs of Gatehouse serving MCP calls, one per protocol era, with py-spy.

    .venv/bin/python benchmarks/profile_mcp.py [--seconds 10] [--concurrency 16] [--prefix ""]
        [--server daphne]

For each era it starts Gatehouse as shipped (benchmarks/mcp_servers.py: auditing on, Redis rate
limit checked on every call, PostgreSQL) under Daphne (or ``--server uvicorn``), warms it up, and
records it with ``py-spy record`` (``--rate`` samples a second; idle threads left out) while the
load client (benchmarks/mcp_load.py) drives ``tools/call`` at ``--concurrency``. Writes
``benchmarks/profiles/<prefix><era>.svg``: open one in a browser, hover and click to zoom. The
committed ``before-*.svg`` were made so on the code before issue 20's changes. py-spy needs to read
another process's memory: root, or ptrace allowed (``kernel.yama.ptrace_scope``). Prints the calls
per second measured while recording (slower than unprofiled: py-spy's sampling costs the server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_support import BASE_DIR
from mcp_load import ERAS, drive
from mcp_servers import Server, database_ready, shipped_env, token_mint
from mcp_throughput import DEFAULT_DATABASE

PROFILES = BASE_DIR / "benchmarks" / "profiles"


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.path.exists(found):
        raise SystemExit("py-spy is not installed: pip install -e '.[dev]'")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--prefix", default="", help="file name prefix, e.g. before-")
    parser.add_argument("--server", default="daphne", choices=["daphne", "uvicorn", "granian"])
    parser.add_argument("--eras", default=",".join(ERAS))
    parser.add_argument(
        "--raw", action="store_true", help="collapsed stacks (.txt) instead of an SVG, for scripts to sum"
    )
    parser.add_argument(
        "--gil", action="store_true", help="only samples holding the GIL: CPU spent, not waits for the GIL"
    )
    args = parser.parse_args()
    spy = py_spy()
    public = "http://127.0.0.1:8000"
    env = shipped_env(database_url=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE), public=public)
    database_ready(env)
    token = token_mint(env, resource=f"{public}/mcp")
    PROFILES.mkdir(exist_ok=True)

    for era in args.eras.split(","):
        server = Server(
            label=f"Gatehouse {args.server}", kind=args.server, app="gatehouse", env=env, token=token
        )
        server.start()
        try:
            server.wait_ready()
            asyncio.run(drive(server.url, token, era=era, concurrency=4, seconds=1))
            assert server.process is not None
            svg = PROFILES / f"{args.prefix}{era}.{'txt' if args.raw else 'svg'}"
            # --subprocesses: granian serves from a child process.
            recorder = subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(server.process.pid),
                    "--subprocesses",
                    # One box per function, not per line: a wide function stays one box.
                    "--function",
                    *(["--gil"] if args.gil else []),
                    "--rate",
                    str(args.rate),
                    "--duration",
                    str(args.seconds),
                    "--format",
                    "raw" if args.raw else "flamegraph",
                    "--output",
                    str(svg),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            time.sleep(1)  # py-spy attaches
            level = asyncio.run(
                drive(server.url, token, era=era, concurrency=args.concurrency, seconds=args.seconds - 1.5)
            )
            _, errors = recorder.communicate(timeout=60)
            if recorder.returncode:
                raise SystemExit(f"py-spy failed: {errors.decode(errors='replace')[-2000:]}")
            print(
                f"{era}: {svg.relative_to(BASE_DIR)} ({level.rate:.0f} calls/s at concurrency "
                f"{args.concurrency} while sampled, p50 {level.p50:.2f} ms)"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()

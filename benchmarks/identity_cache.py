"""What keeping a token's identity (``mcp_gateway.kernel.identity_cache``) buys, side by side in one run.

    .venv/bin/python benchmarks/identity_cache.py [--seconds 8] [--concurrency 1,16] [--rounds 2]

Two Gatehouse processes under Daphne on one database, as shipped (audit on, a never-reached rate
limit checked in Redis on every call), differing only in ``MCP_IDENTITY_CACHE_SECONDS``: 0 (every
request queries, as before) and the default. Drives 2025-11-25 session ``tools/call
test_simple_text`` with ``mcp_throughput``'s client, alternating the two processes level by level
and round by round so machine noise falls on both, and prints calls/s, p50 and the SQL statements
each ran per request. A measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess

from bench_support import BASE_DIR, bench_env, free_port, prepare_database, wait_for
from mcp_load import drive
from mcp_servers import command, token_mint

SETTINGS = {"uncached (0)": "0", "cached (30 s)": "30"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    ports = {name: free_port() for name in SETTINGS}
    public = f"http://127.0.0.1:{ports['uncached (0)']}"
    env = bench_env(
        public=public,
        name="identity_cache",
        GATEHOUSE_AUDIT="true",
        GATEHOUSE_COUNT_QUERIES="true",
        RATE_LIMIT_TOOL="100000000/minute",
    )
    prepare_database(env)
    token = token_mint(env, resource=f"{public}/mcp")
    processes = {}
    for name, seconds in SETTINGS.items():
        processes[name] = subprocess.Popen(
            command("daphne", "gatehouse", ports[name]),
            cwd=BASE_DIR,
            env={**env, "MCP_IDENTITY_CACHE_SECONDS": seconds},
            stderr=subprocess.PIPE,
        )
    rates: dict[tuple[str, int], list[float]] = {}
    p50s: dict[tuple[str, int], list[float]] = {}
    requests = dict.fromkeys(SETTINGS, 0)
    queries: dict[str, int | None] = {}
    try:
        for name, process in processes.items():
            wait_for(ports[name], process)
        for _ in range(args.rounds):
            for concurrency in levels:
                for name in SETTINGS:
                    level = asyncio.run(
                        drive(
                            f"http://127.0.0.1:{ports[name]}/mcp",
                            token,
                            era="2025-11-25",
                            concurrency=concurrency,
                            seconds=args.seconds,
                        )
                    )
                    rates.setdefault((name, concurrency), []).append(level.rate)
                    p50s.setdefault((name, concurrency), []).append(level.p50)
                    requests[name] += level.requests
    finally:
        for name, process in processes.items():
            process.terminate()
            _, stderr = process.communicate(timeout=30)
            match = re.search(rb"gatehouse-sql-queries: (\d+)", stderr or b"")
            queries[name] = int(match.group(1)) if match else None
    print(
        f"tools/call test_simple_text, 2025-11-25 sessions, {args.seconds:g} s x {args.rounds} rounds, "
        f"{os.cpu_count()} cores"
    )
    for concurrency in levels:
        for name in SETTINGS:
            rate = statistics.median(rates[(name, concurrency)])
            p50 = statistics.median(p50s[(name, concurrency)])
            print(f"c{concurrency:<3} {name:>18}: {rate:6.0f} calls/s, p50 {p50:6.2f} ms")
    for name in SETTINGS:
        count = queries[name]
        if count is not None:
            print(
                f"{name}: {count} SQL statements / {requests[name]} requests = "
                f"{count / requests[name]:.2f} per request"
            )


if __name__ == "__main__":
    main()

"""How long an MCP call waits for its audit row: flushed to disk (writes, refusals, failures) against
committed but not awaited on disk (read-only calls that succeeded).

    .venv/bin/python benchmarks/audit_commit.py [--seconds 4] [--rounds 3] [--concurrency 1,16]

Drives the endpoint's own group-commit writer (``core.audit.trail.audit_record_async``, on the hot-path
pool) with N concurrent callers each recording one row after another, alternating the two kinds in
rounds so both see the same machine, and prints the median over rounds of rows/s and of the p50 and
p99 wait. Uses the PostgreSQL database at BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_audit), created and migrated if needed. A
measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

from bench_support import BASE_DIR, bench_env, prepare_database

KINDS = {"flushed (writes)": True, "not awaited on disk (reads)": False}


async def drive(*, concurrency: int, seconds: float, flushed: bool) -> tuple[float, float, float]:
    from core.audit.entry import AuditEntry
    from core.audit.trail import audit_record_async
    from core.models import AuditAction

    waits: list[float] = []
    stop_at = time.monotonic() + seconds

    async def caller() -> None:
        while time.monotonic() < stop_at:
            entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="benchmark", detail={"arguments": {}})
            started = time.perf_counter()
            await audit_record_async(entry, flushed=flushed)
            waits.append(time.perf_counter() - started)

    began = time.monotonic()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    elapsed = time.monotonic() - began
    waits.sort()
    return len(waits) / elapsed, statistics.median(waits) * 1000, waits[int(len(waits) * 0.99)] * 1000


async def measure(
    levels: list[int], seconds: float, rounds: int
) -> dict[tuple[str, int], list[tuple[float, ...]]]:
    results: dict[tuple[str, int], list[tuple[float, ...]]] = {}
    await drive(concurrency=4, seconds=1.0, flushed=True)  # the pool opened and statements prepared
    for _ in range(rounds):
        for concurrency in levels:
            for kind, flushed in KINDS.items():
                row = await drive(concurrency=concurrency, seconds=seconds, flushed=flushed)
                results.setdefault((kind, concurrency), []).append(row)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    env = bench_env(public="http://127.0.0.1:9", name="audit", GATEHOUSE_AUDIT="true")
    prepare_database(env)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    results = asyncio.run(measure(levels, args.seconds, args.rounds))

    print(f"audit rows through the group commit, median of {args.rounds} rounds of {args.seconds:g} s")
    print(f"{'conc.':>5} | {'kind':<28} | {'rows/s':>7} | {'p50 ms':>7} | {'p99 ms':>7}")
    for concurrency in levels:
        for kind in KINDS:
            rows = results[(kind, concurrency)]
            rate, p50, p99 = (statistics.median(row[i] for row in rows) for i in range(3))
            print(f"{concurrency:>5} | {kind:<28} | {rate:>7.0f} | {p50:>7.3f} | {p99:>7.2f}")


if __name__ == "__main__":
    main()

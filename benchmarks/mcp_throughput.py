"""Authenticated tools/call throughput and latency: Gatehouse as shipped against the bare SDK, both
protocol eras, under Daphne, uvicorn and granian, side by side in one run.

    .venv/bin/python benchmarks/mcp_throughput.py [--seconds 8] [--concurrency 1,16,64]
        [--eras 2025-11-25,2026-07-28] [--variants] [--large]

Servers (benchmarks/mcp_servers.py): the bare SDK ``MCPServer`` under uvicorn (the baseline every
ratio is against) and under Daphne; Gatehouse as ``make run`` ships it (auditing on, access log and
log level at their defaults, a Redis rate limit checked on every call but never reached, on
PostgreSQL) under Daphne (``make run``'s server), uvicorn and granian (when installed). With
``--variants``, Gatehouse under Daphne also without auditing, without the rate limit, with Python's
garbage collector as Python sets it (``GC_GEN0_THRESHOLD=0``) and without the identity cache, to
show what each costs. With ``--large``, Gatehouse under Daphne also on a database
with 100,000 sessions, 100,000 tokens and 1,000,000 audit rows (benchmarks/large_db.py), against
the same server on the benchmark's small database.

For each era (a session per concurrent worker on 2025-11-25; stateless POSTs on 2026-07-28;
benchmarks/mcp_load.py) every server is started afresh, warmed up, and driven for ``--seconds`` at
each concurrency, servers taking turns within each level. Prints Markdown tables: calls/s with p50
and p99 latency, the ratio to bare uvicorn, the SQL statements per request each Gatehouse ran
(``GATEHOUSE_COUNT_QUERIES``; handshakes and warm-up included), and each server's own CPU time per
request (its processes' user and system time from /proc over every request it answered: steadier
than calls/s on a shared machine, where a neighbour slows a call but does not make it cost more).
The default run takes about five minutes. Databases: ``BENCH_DATABASE_URL`` (default
``…/gatehouse_bench_mcp``) and the same name with ``_large``; created, migrated and cleared of
earlier runs' sessions and audit rows. A measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from large_db import large_db_seed
from mcp_load import ERAS, TOOL, Level, drive
from mcp_servers import Server, database_ready, event_loop_note, granian_installed, shipped_env, token_mint

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/gatehouse_bench_mcp"
BASELINE = "bare uvicorn"


Plan = list[tuple[str, str, str, dict[str, str], str]]


def servers_plan(*, variants: bool, large: bool) -> Plan:
    """(label, ASGI server, application, settings over the shipped ones, database) for each server."""
    plan: Plan = [
        (BASELINE, "uvicorn", "bare", {}, ""),
        ("bare Daphne", "daphne", "bare", {}, ""),
        ("Gatehouse Daphne", "daphne", "gatehouse", {}, "small"),
        ("Gatehouse uvicorn", "uvicorn", "gatehouse", {}, "small"),
    ]
    if granian_installed():
        plan[2:2] = [("bare granian", "granian", "bare", {}, "")]
        plan.append(("Gatehouse granian", "granian", "gatehouse", {}, "small"))
    if variants:
        plan += [
            ("Gatehouse Daphne, no audit", "daphne", "gatehouse", {"GATEHOUSE_AUDIT": "false"}, "small"),
            ("Gatehouse Daphne, no rate limit", "daphne", "gatehouse", {"RATE_LIMIT_TOOL": "none"}, "small"),
            (
                "Gatehouse Daphne, collector untuned",
                "daphne",
                "gatehouse",
                {"GC_GEN0_THRESHOLD": "0"},
                "small",
            ),
            (
                "Gatehouse Daphne, identities not kept",
                "daphne",
                "gatehouse",
                {"MCP_IDENTITY_CACHE_SECONDS": "0"},
                "small",
            ),
        ]
    if large:
        plan.append(("Gatehouse Daphne, large DB", "daphne", "gatehouse", {}, "large"))
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per server and level")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of calls before measuring")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--eras", default=",".join(ERAS))
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also Gatehouse without audit, without limit, without the identity cache",
    )
    parser.add_argument("--large", action="store_true", help="also Gatehouse on the large database")
    parser.add_argument("--only", default="", help="these servers only: labels separated by semicolons")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    eras = args.eras.split(",")
    plan = servers_plan(variants=args.variants, large=args.large)
    if args.only:
        plan = [entry for entry in plan if entry[0] in args.only.split(";")]

    small = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE)
    databases = {"small": small, **({"large": small + "_large"} if args.large else {})}
    # One public URL for every Gatehouse, so one token per database serves them all.
    public = "http://127.0.0.1:8000"
    tokens = {}
    for name, url in databases.items():
        env = shipped_env(database_url=url, public=public)
        database_ready(env)
        tokens[name] = token_mint(env, resource=f"{public}/mcp")
        if name == "large":
            large_db_seed(url)

    results: dict[tuple[str, str], list[Level]] = {}
    statements: dict[tuple[str, str], int | None] = {}
    cpu: dict[tuple[str, str], float] = {}
    for era in eras:
        servers = [
            Server(
                label=label,
                kind=kind,
                app=app,
                env=shipped_env(database_url=databases[db], public=public, **extra)
                if db
                else dict(os.environ),
                token=tokens[db] if db else None,
            )
            for label, kind, app, extra, db in plan
        ]
        print(f"{era}: starting {len(servers)} servers", file=sys.stderr, flush=True)
        try:
            for server in servers:
                server.start()
            for server in servers:
                server.wait_ready()
                results[(era, server.label)] = []
                cpu[(era, server.label)] = -server.cpu_seconds()
            for concurrency in levels:
                for server in servers:
                    level = asyncio.run(
                        drive(
                            server.url,
                            server.token,
                            era=era,
                            concurrency=concurrency,
                            seconds=args.seconds,
                            warmup=args.warmup,
                        )
                    )
                    results[(era, server.label)].append(level)
                    print(
                        f"  {server.label:<32} c={concurrency:<3} {level.rate:7.0f} calls/s "
                        f"p50 {level.p50:7.2f} ms  errors {level.errors} {level.first_error}",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            for server in servers:
                cpu[(era, server.label)] = cpu.get((era, server.label), 0.0) + server.cpu_seconds()
                statements[(era, server.label)] = server.stop()

    labels = [entry[0] for entry in plan]
    baselines = {label: baseline_of(kind, app, labels) for label, kind, app, _, _ in plan}
    report(
        results,
        statements,
        cpu,
        labels=labels,
        baselines=baselines,
        eras=eras,
        levels=levels,
        seconds=args.seconds,
    )
    if args.large:
        report_large(results, eras=eras, levels=levels)


SERVER_NAMES = {"uvicorn": "uvicorn", "daphne": "Daphne", "granian": "granian"}


def baseline_of(kind: str, app: str, labels: list[str]) -> str | None:
    """What a server's ratio is against: Gatehouse under an ASGI server against the bare SDK under
    the same server (what the gateway costs); a bare server against the bare SDK under uvicorn
    (what the ASGI server costs)."""
    if app == "bare":
        return None if kind == "uvicorn" else BASELINE
    same = f"bare {SERVER_NAMES[kind]}"
    return same if same in labels else BASELINE


def report(
    results: dict[tuple[str, str], list[Level]],
    statements: dict[tuple[str, str], int | None],
    cpu: dict[tuple[str, str], float],
    *,
    labels: list[str],
    baselines: dict[str, str | None],
    eras: list[str],
    levels: list[int],
    seconds: float,
) -> None:
    print(
        f"\ntools/call {TOOL}, {seconds:g} s per server and level, loopback, {os.cpu_count()} cores, "
        f"uvicorn and granian on {event_loop_note()}, {time.strftime('%Y-%m-%d')}"
    )
    print(
        "calls/s (p50 / p99 ms), x: Gatehouse against the bare SDK under the same ASGI server, a bare "
        "server against the bare SDK under uvicorn, at the same era and concurrency\n"
    )
    print("| era | conc. | " + " | ".join(labels) + " |")
    print("|---|---:|" + "---:|" * len(labels))
    for era in eras:
        for index, concurrency in enumerate(levels):
            cells = []
            for label in labels:
                level = results[(era, label)][index]
                cell = f"{level.rate:.0f} ({level.p50:.2f} / {level.p99:.1f})"
                baseline = baselines.get(label)
                base = results.get((era, baseline)) if baseline else None
                if base:
                    cell += f" x{level.rate / base[index].rate:.2f}"
                if level.errors:
                    cell += f" [{level.errors} failed]"
                cells.append(cell)
            print(f"| {era} | {concurrency} | " + " | ".join(cells) + " |")
        sql, costs = [], []
        for label in labels:
            count = statements.get((era, label))
            requests = sum(level.requests for level in results[(era, label)])
            sql.append(f"{count / requests:.2f}" if count is not None and requests else "")
            # The server's own CPU per request: what the throughput is made of, and far steadier
            # than it on a shared machine (a busy neighbour slows a call, but does not make it
            # cost more).
            costs.append(f"{cpu[(era, label)] / requests * 1e6:.0f}" if requests else "")
        print(f"| {era} | SQL/request | " + " | ".join(sql) + " |")
        print(f"| {era} | server CPU µs/request | " + " | ".join(costs) + " |")


def report_large(results: dict[tuple[str, str], list[Level]], *, eras: list[str], levels: list[int]) -> None:
    print("\nGatehouse under Daphne: small database against the large one (100,000 sessions, 100,000")
    print("tokens, 1,000,000 audit rows); p50 ms and the change\n")
    print("| era | conc. | small DB p50 | large DB p50 | change | small DB calls/s | large DB calls/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for era in eras:
        for index, concurrency in enumerate(levels):
            small = results[(era, "Gatehouse Daphne")][index]
            large = results[(era, "Gatehouse Daphne, large DB")][index]
            change = (large.p50 / small.p50 - 1) * 100
            print(
                f"| {era} | {concurrency} | {small.p50:.2f} | {large.p50:.2f} | {change:+.0f}% | "
                f"{small.rate:.0f} | {large.rate:.0f} |"
            )


if __name__ == "__main__":
    main()

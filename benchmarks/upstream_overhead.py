"""What Gatehouse adds to a call of an upstream MCP server's tool, over calling that server directly.

    .venv/bin/python benchmarks/upstream_overhead.py [--iterations 400] [--concurrency 1,16]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_upstream: migrated, then `bootstrap_demo`),
starts the upstream test server (`tests/support/upstream_server.py`, the SDK's MCPServer over Streamable
HTTP under uvicorn), gives acme an upstream row for it (prefix on, no credentials), starts
Gatehouse under Daphne as shipped (auditing on, Redis rate limits counted on every call but set too
high to refuse, the upstream session pool at its default size) and mints alice (acme admin) a token.

Then, at each concurrency, it drives `tools/call echo` with the same client code both ways: one
2025-11-25 MCP session per concurrent worker, plain JSON-RPC POSTs over aiohttp (as the other
benchmarks do), each worker making its calls one after another. Directly against the upstream
(`echo`), and through Gatehouse (`bench_echo`: bearer check, scopes, rate limit, the federated
catalogue, a pooled upstream session, the forwarded call, audit row); for reference, also
Gatehouse's own trivial tool (`test_simple_text`, the conformance toolset turned on for acme), which
pays everything but the forwarding. Warm-up first, then rounds that alternate the paths, so the
machine's drift falls on all alike. Prints p50 and p95 latency in ms, calls per second, and what
Gatehouse adds. A measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import aiohttp
from bench_support import (
    BASE_DIR,
    PYTHON,
    access_token_for_alice,
    bench_env,
    daphne_serving,
    free_port,
    prepare_database,
    wait_for,
)
from run_query_overhead import ROUNDS, WARMUP, RawHttp, Samples, django_setup

UPSTREAM_NAME = "bench"
ARGUMENTS = {"text": "hello"}


@dataclass
class Level:
    """One path at one concurrency: every call's latency, and the wall time of the rounds."""

    samples: Samples = field(default_factory=Samples)
    seconds: float = 0.0

    def calls_per_second(self) -> float:
        return len(self.samples.seconds) / self.seconds if self.seconds else 0.0


def acme_prepare(url: str) -> None:
    """acme's upstream row, and the conformance toolset on (the reference tool)."""
    from accounts.models import Tenant
    from mcp_gateway.models import TenantToolset
    from upstreams.models import Upstream

    acme = Tenant.objects.get(slug="acme")
    TenantToolset.objects.update_or_create(tenant=acme, toolset="conformance", defaults={"enabled": True})
    Upstream.objects.update_or_create(
        tenant=acme,
        name=UPSTREAM_NAME,
        defaults={"url": url, "prefix_tools": True, "tool_names": [f"{UPSTREAM_NAME}_echo"]},
    )


async def sessions(http: aiohttp.ClientSession, url: str, token: str, count: int) -> list[RawHttp]:
    opened = [RawHttp(http, url, token) for _ in range(count)]
    for raw in opened:
        await raw.open()
    return opened


async def run(workers: list[RawHttp], tool: str, calls_per_worker: int, level: Level) -> None:
    arguments = ARGUMENTS if tool.endswith("echo") else {}
    """Every worker makes ``calls_per_worker`` calls in turn, all workers at once."""

    async def worker(raw: RawHttp) -> None:
        for _ in range(calls_per_worker):
            started = time.perf_counter()
            await raw.call(tool, arguments)
            level.samples.seconds.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker(raw) for raw in workers))
    level.seconds += time.perf_counter() - started


async def benchmark(
    *, upstream_url: str, gateway_url: str, token: str, iterations: int, concurrency: list[int]
) -> dict[int, dict[str, Level]]:
    results: dict[int, dict[str, Level]] = {}
    # Enough connections for every worker of both paths.
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        for workers in concurrency:
            paths = {
                "direct": (await sessions(http, upstream_url, "", workers), "echo"),
                "gatehouse": (await sessions(http, gateway_url, token, workers), f"{UPSTREAM_NAME}_echo"),
                "local": (await sessions(http, gateway_url, token, workers), "test_simple_text"),
            }
            levels = results[workers] = {name: Level() for name in paths}
            for clients, tool in paths.values():
                await run(clients, tool, WARMUP, Level())
            per_worker = max(1, iterations // (ROUNDS * workers))
            for _ in range(ROUNDS):
                for name, (clients, tool) in paths.items():
                    await run(clients, tool, per_worker, levels[name])
    return results


def report(results: dict[int, dict[str, Level]], iterations: int, pool_size: str) -> None:
    print(
        f"\nUpstream MCP server directly vs through Gatehouse, tools/call echo; loopback, "
        f"{os.cpu_count()} cores; --iterations {iterations}; UPSTREAM_POOL_SIZE {pool_size}\n"
    )
    print("| concurrency | path | p50 ms | p95 ms | calls/s |")
    print("|---:|---|---:|---:|---:|")
    for workers, levels in results.items():
        direct, gatehouse = levels["direct"], levels["gatehouse"]
        for label, level in (
            ("upstream directly", direct),
            ("through Gatehouse", gatehouse),
            ("(reference: Gatehouse's own test_simple_text)", levels["local"]),
        ):
            samples = level.samples
            print(
                f"| {workers} | {label} | {samples.p50():.2f} | {samples.p95():.2f} "
                f"| {level.calls_per_second():.0f} |"
            )
        print(
            f"| {workers} | **added by Gatehouse** | {gatehouse.samples.p50() - direct.samples.p50():+.2f} "
            f"| {gatehouse.samples.p95() - direct.samples.p95():+.2f} "
            f"| {gatehouse.calls_per_second() - direct.calls_per_second():+.0f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=400, help="timed calls per path and concurrency")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated worker counts")
    args = parser.parse_args()
    concurrency = [int(n) for n in args.concurrency.split(",") if n.strip()]

    port, upstream_port = free_port(), free_port()
    public = f"http://127.0.0.1:{port}"
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    env = bench_env(
        public=public,
        name="upstream",
        # Counted on every call, never reached: the limiter's cost is in the figures.
        RATE_LIMIT_TOOL="1000000/minute",
        RATE_LIMIT_TOOL_EXPENSIVE="1000000/minute",
    )
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    acme_prepare(upstream_url)
    token = access_token_for_alice(scope="mcp:read mcp:write", resource=f"{public}/mcp")

    upstream = subprocess.Popen(
        [PYTHON, "tests/support/upstream_server.py", "http", str(upstream_port)],
        cwd=BASE_DIR,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(upstream_port, upstream)
        with daphne_serving(port=port, env=env):
            print(f"Measuring ({args.iterations} calls per path and concurrency)...", file=sys.stderr)
            results = asyncio.run(
                benchmark(
                    upstream_url=upstream_url,
                    gateway_url=f"{public}/mcp",
                    token=token,
                    iterations=args.iterations,
                    concurrency=concurrency,
                )
            )
    finally:
        upstream.terminate()
        upstream.wait(timeout=15)
    report(results, args.iterations, env.get("UPSTREAM_POOL_SIZE", "8 (default)"))


if __name__ == "__main__":
    main()

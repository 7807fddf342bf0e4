"""Authenticated tools/call throughput: Gatehouse under Daphne against a bare SDK server.

    .venv/bin/python benchmarks/mcp_throughput.py [--seconds 8] [--concurrency 1,16,64]

Starts servers on loopback: the bare SDK server under uvicorn (the SDK's own recipe, the baseline
the ratios are against), the same bare server under Daphne (to show what the ASGI server costs by
itself) and Gatehouse under Daphne three times: without auditing, with auditing, and with auditing
and a (never reached) per-user rate limit checked in Redis, to show what each costs. It opens one MCP
session per concurrent worker (2025-11-25 handshake), and drives `tools/call test_simple_text` for a
fixed time at each concurrency with an aiohttp client (an httpx client saturates before the servers
do). Prints calls/second, p50 and p99 latency side by side, and the SQL statements each Gatehouse
ran per request. Uses the PostgreSQL database at BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/gatehouse_bench), created and migrated if needed. A measurement,
not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import aiohttp
from bench_support import BASE_DIR, PYTHON, access_token_for_alice, free_port, prepare_database, wait_for

CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "test_simple_text", "arguments": {}},
}


def mint_token(env: dict[str, str], resource: str) -> str:
    """An access token for alice in acme, as the OAuth flow would have issued it."""
    # Only the server counts its queries; this process just writes two rows.
    os.environ.update({key: value for key, value in env.items() if key != "GATEHOUSE_COUNT_QUERIES"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from accounts.models import Tenant
    from mcp_gateway.models import TenantToolset

    acme = Tenant.objects.get(slug="acme")
    TenantToolset.objects.update_or_create(tenant=acme, toolset="conformance", defaults={"enabled": True})
    return access_token_for_alice(scope="mcp:read mcp:write", resource=resource)


@dataclass
class Level:
    concurrency: int
    calls: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def row(self) -> tuple[float, float, float]:
        ordered = sorted(self.latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")
        p50 = statistics.median(ordered) if ordered else float("nan")
        return self.calls / self.seconds, p50 * 1000, p99 * 1000


async def open_session(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> dict[str, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    async with http.post(url, json=body, headers=headers) as response:
        await response.read()
        assert response.status == 200, response.status
        session_headers = dict(headers)
        if "mcp-session-id" in response.headers:  # a stateless server issues none
            session_headers["mcp-session-id"] = response.headers["mcp-session-id"]
    session_headers["mcp-protocol-version"] = "2025-11-25"
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=note, headers=session_headers) as response:
        await response.read()
    return session_headers


async def drive(url: str, token: str | None, concurrency: int, seconds: float) -> Level:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    level = Level(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency + 4)
    async with aiohttp.ClientSession(connector=connector) as http:
        sessions = [await open_session(http, url, headers) for _ in range(concurrency)]
        payload = json.dumps(CALL)
        stop_at = time.monotonic() + seconds

        async def worker(session_headers: dict[str, str]) -> None:
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                async with http.post(url, data=payload, headers=session_headers) as response:
                    body = await response.read()
                if response.status == 200 and b'"result"' in body:
                    level.calls += 1
                    level.latencies.append(time.perf_counter() - started)
                else:
                    level.errors += 1

        began = time.monotonic()
        await asyncio.gather(*(worker(s) for s in sessions))
        level.seconds = time.monotonic() - began
    return level


# Gatehouse variants, all sharing one database, one public URL (so one token serves them all) and
# the settings above; each adds its own. Auditing and rate limits are on by default in production.
VARIANTS = {
    "no audit": {"GATEHOUSE_AUDIT": "false", "RATE_LIMIT_TOOL": "none"},
    "audit": {"GATEHOUSE_AUDIT": "true", "RATE_LIMIT_TOOL": "none"},
    # A limit no run reaches, so every call is counted in Redis (through leases) and none is refused.
    "audit+limits": {
        "GATEHOUSE_AUDIT": "true",
        "RATE_LIMIT_TOOL": "100000000/minute",
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "RATE_LIMIT_KEY_PREFIX": "gatehouse-bench-" + secrets.token_hex(4),
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", default="1,16,64")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    gh_ports = {name: free_port() for name in VARIANTS}
    bare_port, bare_daphne_port = free_port(), free_port()
    public = f"http://127.0.0.1:{gh_ports['no audit']}"
    env = {
        **os.environ,
        "DATABASE_URL": os.environ.get(
            "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gatehouse_bench"
        ),
        "SECRET_KEY": "benchmark-only-" + secrets.token_hex(8),
        "PUBLIC_URL": public,
        "DEMO_PASSWORD": "benchmark-password",
        "GATEHOUSE_COUNT_QUERIES": "true",
        "MCP_SESSION_PURGE_INTERVAL_SECONDS": "0",
        "LOG_LEVEL": "WARNING",
    }
    prepare_database(env)
    token = mint_token(env, f"{public}/mcp")

    def daphne(port: int, application: str, **extra: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [PYTHON, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(port), application],
            cwd=BASE_DIR,
            env={**env, **extra},
            stderr=subprocess.PIPE,
        )

    gatehouses = {
        name: daphne(gh_ports[name], "config.asgi:application", **extra) for name, extra in VARIANTS.items()
    }
    bare_daphne = daphne(bare_daphne_port, "benchmarks.bare_server:application")
    bare = subprocess.Popen(
        [PYTHON, str(BASE_DIR / "benchmarks" / "bare_server.py"), str(bare_port)], cwd=BASE_DIR
    )
    targets = {
        "bare": (f"http://127.0.0.1:{bare_port}/mcp", None),
        "bare_daphne": (f"http://127.0.0.1:{bare_daphne_port}/mcp", None),
        **{name: (f"http://127.0.0.1:{gh_ports[name]}/mcp", token) for name in VARIANTS},
    }
    results: dict[str, list[Level]] = {name: [] for name in targets}
    requests = dict.fromkeys(VARIANTS, 0)
    queries: dict[str, int | None] = {}
    try:
        for name, process in gatehouses.items():
            wait_for(gh_ports[name], process)
        wait_for(bare_port, bare)
        wait_for(bare_daphne_port, bare_daphne)
        for concurrency in levels:
            for name, (url, bearer) in targets.items():
                results[name].append(asyncio.run(drive(url, bearer, concurrency, args.seconds)))
            for name in VARIANTS:
                level = results[name][-1]
                requests[name] += level.calls + level.errors + 2 * concurrency
    finally:
        for process in (bare, bare_daphne, *gatehouses.values()):
            process.terminate()
        for name, process in gatehouses.items():
            _, stderr = process.communicate(timeout=30)
            match = re.search(rb"gatehouse-sql-queries: (\d+)", stderr or b"")
            queries[name] = int(match.group(1)) if match else None
        bare.wait(timeout=30)
        bare_daphne.communicate(timeout=30)

    print(f"tools/call test_simple_text, {args.seconds:g} s per level, loopback, {os.cpu_count()} cores")
    print("calls/s, p50 and p99 ms; ratio: each Gatehouse variant / the bare server under uvicorn")
    columns = ["bare uvicorn", "bare Daphne", *(f"Gatehouse, {name}" for name in VARIANTS)]
    print(f"{'conc.':>5} | " + " | ".join(f"{column:>22}" for column in columns) + " | ratios")
    for index, concurrency in enumerate(levels):
        rows = {name: results[name][index].row() for name in targets}
        ratios = " ".join(f"{rows[name][0] / rows['bare'][0]:.2f}" for name in VARIANTS)
        print(f"{concurrency:>5} | " + " | ".join(_cell(row) for row in rows.values()) + f" | {ratios}")
    errors = sum(level.errors for levels_ in results.values() for level in levels_)
    print(f"failed calls: {errors}")
    for name in VARIANTS:
        count = queries[name]
        if count is not None:
            print(
                f"Gatehouse, {name}: {count} SQL statements for {requests[name]} requests = "
                f"{count / requests[name]:.2f} per request"
            )


def _cell(row: tuple[float, float, float]) -> str:
    return f"{row[0]:>6.0f} {row[1]:>7.2f} {row[2]:>7.2f}"


if __name__ == "__main__":
    main()

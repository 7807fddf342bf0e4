"""What one ``tools/call`` costs the application itself, without an HTTP server or a load client:
Gatehouse's ASGI application and the bare SDK's, each called in a process of its own with requests
built in memory, in both protocol eras, and what Python's garbage collector took of it.

    .venv/bin/python benchmarks/mcp_inprocess.py [--seconds 5] [--concurrency 16] [--eras ...]
        [--only bare,gatehouse] [--calls N] [--profile FILE]

On a 2-core machine the HTTP benchmark (``mcp_throughput.py``) shares the cores between the server,
its load client and PostgreSQL; here the only Python work is the application's, so its CPU per
request (the process's user and system time, its threads included) shows a change to the hot path
with less noise. The table also gives the collector's time per call (``gc.callbacks``) and its
longest pause: a full collection stops the event loop, and its pause is every answer's wait.

``--calls N`` runs a fixed number of calls instead of a fixed time, for a deterministic count of
instructions under ``valgrind --tool=callgrind`` (two runs, N and a larger N: the difference is the
calls' alone). ``--profile`` writes a cProfile of Gatehouse's run for ``pstats`` (its figures are
inflated by the profiler: compare them with each other only).

Gatehouse runs as ``mcp_servers.shipped_env`` ships it (auditing on, the Redis rate limit checked on
every call, PostgreSQL, ``GC_GEN0_THRESHOLD`` at its default), warmed up first; the bare SDK with
Python's collector as Python sets it. A measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from typing import Any

from bench_support import BASE_DIR, PYTHON
from mcp_load import ERAS, INITIALIZE, TOOL, call_body

HOST = b"127.0.0.1:8000"
WARMUP_SECONDS = 1.0
WARMUP_CALLS = 10


def request_headers(*, era: str, token: str | None, session: str | None) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"host", HOST),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
    ]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if era == "2026-07-28":
        headers += [(b"mcp-protocol-version", era.encode()), (b"mcp-method", b"tools/call")]
        headers.append((b"mcp-name", TOOL.encode()))
    elif session is not None:
        headers += [(b"mcp-protocol-version", era.encode()), (b"mcp-session-id", session.encode())]
    return headers


async def post(
    app: Any, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, dict[str, str], bytes]:
    """One POST through ``app``: its status, headers and body. The client stays connected."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    delivered = False
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    status = 0
    answer_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            answer_headers.update((k.decode(), v.decode()) for k, v in message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, answer_headers, b"".join(chunks)


async def session_open(app: Any, token: str | None) -> str:
    """A 2025-11-25 session, after its handshake."""
    headers = request_headers(era="2025-11-25", token=token, session=None)
    status, answer, text = await post(app, headers, json.dumps(INITIALIZE).encode())
    if status != 200 or "mcp-session-id" not in answer:
        raise RuntimeError(f"initialize answered {status}: {text[:300]!r}")
    session = answer["mcp-session-id"]
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    await post(app, request_headers(era="2025-11-25", token=token, session=session), note)
    return session


class Collector:
    """Python's garbage collector's time, per generation, and its longest pause."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.longest = 0.0
        self._started = 0.0
        gc.callbacks.append(self._observe)

    def reset(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.longest = 0.0

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        spent = time.perf_counter() - self._started
        self.seconds[info["generation"]] += spent
        self.longest = max(self.longest, spent)


async def run(
    app: Any, *, token: str | None, era: str, concurrency: int, seconds: float, calls_fixed: int
) -> tuple[int, float, float]:
    """Calls answered, CPU seconds and wall seconds at ``concurrency``, for ``seconds`` or, when
    ``calls_fixed`` is set, for that many calls, after a warm-up."""
    body = json.dumps(call_body(era)).encode()
    workers = []
    for _ in range(concurrency):
        session = await session_open(app, token) if era == "2025-11-25" else None
        workers.append(request_headers(era=era, token=token, session=session))
    calls = 0

    async def worker(headers: list[tuple[bytes, bytes]], stop_at: float, count: int) -> None:
        nonlocal calls
        done = 0
        while done < count if count else time.monotonic() < stop_at:
            status, _, text = await post(app, headers, body)
            if status != 200 or b'"result"' not in text:
                raise RuntimeError(f"answered {status}: {text[:300]!r}")
            done += 1
            calls += 1

    warmup_calls = WARMUP_CALLS if calls_fixed else 0
    await asyncio.gather(*(worker(h, time.monotonic() + WARMUP_SECONDS, warmup_calls) for h in workers))
    calls = 0
    cpu, wall = time.process_time(), time.monotonic()
    share = calls_fixed // concurrency
    await asyncio.gather(*(worker(h, wall + seconds, share) for h in workers))
    wall = time.monotonic() - wall
    # The audit rows of the last calls are written after their answers: their cost counts too.
    await asyncio.sleep(0.3)
    return calls, time.process_time() - cpu, wall


def child(args: argparse.Namespace) -> None:
    """One application's run, in this process: a JSON line per era on stdout."""
    sys.path.insert(0, str(BASE_DIR))
    app: Any
    if args.app == "gatehouse":
        from config.asgi import application as app
    else:
        from bare_server import application as app
    token = os.environ.get("BENCH_TOKEN") or None
    collector = Collector()

    async def main() -> None:
        for era in args.eras.split(","):
            profiler = None
            if args.profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            collector.reset()
            calls, cpu, wall = await run(
                app,
                token=token,
                era=era,
                concurrency=args.concurrency,
                seconds=args.seconds,
                calls_fixed=args.calls,
            )
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(f"{args.profile}.{era}")
            line = {
                "era": era,
                "calls": calls,
                "cpu": cpu,
                "wall": wall,
                "gc": collector.seconds,
                "gc_longest": collector.longest,
            }
            print(json.dumps(line), flush=True)

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--eras", default=",".join(ERAS))
    parser.add_argument("--only", default="bare,gatehouse", help="the applications: bare, gatehouse")
    parser.add_argument("--calls", type=int, default=0, help="this many calls instead of --seconds")
    parser.add_argument("--profile", default="", help="cProfile Gatehouse's run into FILE.<era>")
    parser.add_argument("--app", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.app:
        child(args)
        return

    from mcp_servers import database_ready, shipped_env, token_mint
    from mcp_throughput import DEFAULT_DATABASE

    public = "http://127.0.0.1:8000"
    env = shipped_env(database_url=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE), public=public)
    database_ready(env)
    token = token_mint(env, resource=f"{public}/mcp")
    rows: list[tuple[str, str, dict[str, Any]]] = []
    for app in args.only.split(","):
        child_env = {**env, "BENCH_TOKEN": token} if app == "gatehouse" else dict(os.environ)
        flags = ["--seconds", str(args.seconds), "--concurrency", str(args.concurrency)]
        flags += ["--eras", args.eras, "--calls", str(args.calls)]
        if args.profile and app == "gatehouse":
            flags += ["--profile", args.profile]
        done = subprocess.run(
            [PYTHON, __file__, "--app", app, *flags],
            cwd=BASE_DIR,
            env={**child_env, "DJANGO_SETTINGS_MODULE": "config.settings"},
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(f"{app}: {done.stderr[-3000:]}")
        rows += [(app, line["era"], line) for line in map(json.loads, _json_lines(done.stdout))]
    print(
        f"\ntools/call {TOOL} in process, concurrency {args.concurrency}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d')}\n"
    )
    print("| era | application | calls/s | CPU µs/call | GC µs/call (gen 0 / 1 / 2) | longest GC pause ms |")
    print("|---|---|---:|---:|---:|---:|")
    for app, era, line in sorted(rows, key=lambda row: (row[1], row[0])):
        calls = line["calls"]
        per_generation = " / ".join(f"{seconds / calls * 1e6:.0f}" for seconds in line["gc"])
        print(
            f"| {era} | {app} | {calls / line['wall']:.0f} | {line['cpu'] / calls * 1e6:.0f} | "
            f"{sum(line['gc']) / calls * 1e6:.0f} ({per_generation}) | {line['gc_longest'] * 1e3:.1f} |"
        )


def _json_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("{")]


if __name__ == "__main__":
    main()

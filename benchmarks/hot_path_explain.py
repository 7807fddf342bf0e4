"""``EXPLAIN (ANALYZE, BUFFERS)`` of every SQL statement an MCP call makes, on the large database.

    .venv/bin/python benchmarks/hot_path_explain.py [--seconds 3]

Prepares the large benchmark database (benchmarks/large_db.py: 100,000 sessions, 100,000 tokens,
1,000,000 audit rows; seeded on first use, about two minutes), starts Gatehouse as shipped under
Daphne with every statement it sends recorded (benchmarks/sql_trace.py), and drives, after the
server's start: four 2025-11-25 sessions (handshake included) whose ``last_seen`` is then set two
minutes back, so their next call writes it as a live session's would once a minute, calling
``tools/call`` for ``--seconds``; then stateless 2026-07-28 calls for as long. So the list is
found, not written down: whatever the code sends today is what is explained.

Prints each statement with how often it ran per call, then its plan (run twice, the second shown,
inside a transaction rolled back, so writes leave nothing), compact enough for docs/benchmarks.md.
Statements EXPLAIN cannot take (savepoints, ``LISTEN``...) are listed at the end without one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import re
import secrets
import signal
import subprocess
import tempfile
import time
import uuid
from typing import Any

import aiohttp
import psycopg
from bench_support import BASE_DIR, PYTHON, free_port, wait_for
from large_db import large_db_seed
from mcp_load import BASE_HEADERS, TOOL, call_body, open_session
from mcp_servers import database_ready, shipped_env, token_mint
from mcp_throughput import DEFAULT_DATABASE

EXPLAINABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")


async def calls(url: str, token: str, *, database_url: str, seconds: float) -> dict[str, int]:
    headers = {**BASE_HEADERS, "authorization": f"Bearer {token}"}
    done = {"2025-11-25": 0, "2026-07-28": 0}
    async with aiohttp.ClientSession() as http:
        sessions = [await open_session(http, url, headers) for _ in range(4)]
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE mcp_gateway_mcpsession SET last_seen = now() - interval '2 minutes' "
                "WHERE id = ANY(%s)",
                [[session["mcp-session-id"] for session in sessions]],
            )
        modern = {
            **headers,
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": TOOL,
        }
        for era, workers in (("2025-11-25", sessions), ("2026-07-28", [modern] * 4)):
            payload = json.dumps(call_body(era))
            stop_at = time.monotonic() + seconds

            async def worker(
                worker_headers: dict[str, str],
                era: str = era,
                payload: str = payload,
                stop_at: float = stop_at,
            ) -> None:
                while time.monotonic() < stop_at:
                    async with http.post(url, data=payload, headers=worker_headers) as response:
                        body = await response.read()
                    if response.status != 200 or b'"result"' not in body:
                        raise RuntimeError(f"{era} call failed: {response.status} {body[:300]!r}")
                    done[era] += 1

            await asyncio.gather(*(worker(w) for w in workers))
    return done


def trace(
    env: dict[str, str], token: str, *, database_url: str, seconds: float
) -> tuple[dict[str, Any], int]:
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "trace.pickle")
        args = ["-v", "0", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"]
        with open(os.path.join(folder, "server.log"), "wb") as log:
            server = subprocess.Popen(
                [PYTHON, str(BASE_DIR / "benchmarks" / "sql_trace.py"), out, "--", *args],
                cwd=BASE_DIR,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                wait_for(port, server)
                time.sleep(1)  # the server's own start-up statements, forgotten next
                server.send_signal(signal.SIGUSR1)
                done = asyncio.run(
                    calls(f"http://127.0.0.1:{port}/mcp", token, database_url=database_url, seconds=seconds)
                )
            finally:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=30)
        with open(out, "rb") as record:
            seen = pickle.load(record)  # noqa: S301 (written a moment ago by our own sql_trace)
    print(f"calls traced: {done['2025-11-25']} in 4 sessions (2025-11-25), {done['2026-07-28']} stateless")
    return seen, sum(done.values())


# Unique keys an INSERT carries (audit event ids, session ids): made anew, or the plan shown would be
# that of a conflict with the row the server wrote, not of an insert.
_UNIQUE_KEYS = {
    re.compile(r"^[0-9a-f]{32}$"): lambda: uuid.uuid4().hex,
    re.compile(r"^[A-Za-z0-9_-]{43}$"): lambda: secrets.token_urlsafe(32),
}


def fresh_keys(sql: str, params: Any) -> Any:
    if not sql.lstrip().upper().startswith("INSERT") or not isinstance(params, list):
        return params
    fresh = []
    for value in params:
        for shape, make in _UNIQUE_KEYS.items():
            if isinstance(value, str) and shape.match(value):
                value = make()
        fresh.append(value)
    return fresh


def explain(conn: psycopg.Connection, sql: str, params: Any) -> list[str]:
    lines: list[str] = []
    params = fresh_keys(sql, params)
    # The audit writer sends $n placeholders through a raw cursor (core/audit/store.py).
    native = "$1" in sql and "%s" not in sql
    for _ in range(2):  # the second run is shown: what a warm server sees
        with conn.transaction(force_rollback=True):
            cursor = psycopg.RawCursor(conn) if native else conn.cursor()
            with cursor:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params)
                lines = [row[0] for row in cursor.fetchall()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    database_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE) + "_large"
    public = "http://127.0.0.1:8000"
    env = shipped_env(database_url=database_url, public=public)
    env.pop("GATEHOUSE_COUNT_QUERIES")
    database_ready(env)
    token = token_mint(env, resource=f"{public}/mcp")
    large_db_seed(database_url)

    seen, total = trace(env, token, database_url=database_url, seconds=args.seconds)
    unexplained = []
    with psycopg.connect(database_url) as conn:
        for count, sql, params in sorted(seen.values(), key=lambda item: -item[0]):
            if not sql.lstrip().upper().startswith(EXPLAINABLE):
                unexplained.append(f"- {count / total:.3f} per call: `{sql[:120]}`")
                continue
            print(f"\n### {count / total:.3f} per call ({count} times)\n")
            print("```sql\n" + sql[:1200] + ("…" if len(sql) > 1200 else "") + "\n```")
            try:
                plan = explain(conn, sql, params)
            except psycopg.Error as error:
                print(f"(EXPLAIN failed: {error})".strip())
                continue
            print("```\n" + "\n".join(plan) + "\n```")
    print("\nAlso sent, not explainable:\n" + "\n".join(unexplained))


if __name__ == "__main__":
    main()

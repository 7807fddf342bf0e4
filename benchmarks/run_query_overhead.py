"""What `run_query` costs over running the same SQL straight against the database.

    .venv/bin/python benchmarks/run_query_overhead.py [--iterations 300]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_rq: migrated, then `bootstrap_demo`, which fills
acme's sample sales database and its ready "Acme sales" ontology), starts Gatehouse under Daphne
as shipped (auditing on; rate limits off so the loop is never refused) and mints alice (acme admin)
an access token as the OAuth flow would have issued it. Then, for each query below, one at a time
(concurrency 1), it times:

- raw SQL with psycopg: on one connection opened once, and on a fresh connection per query (what
  `run_query` did before each process kept its data sources' connections open,
  `data_agent/source_connections.py`);
- the parts `run_query` adds, in this process: the catalogue lookup (the ontology, its data source
  URL and tables, as the tool reads them) cached as shipped (`data_agent/catalogue.py`: one version
  check) and read afresh, the SQL gate (`sql_gate_check`, sqlglot), the executor (`query_execute`:
  read-only transaction, statement timeout, server-side cursor, JSON-safe values, the connection
  reset) on a pooled connection as shipped and on a new one, and the lineage;
- `run_query` end to end: through the official MCP SDK client over HTTP, and as raw JSON-RPC POSTs
  (aiohttp), which leaves out the SDK client's own work (of which the check of each answer against
  the tool's output schema, timed alone with jsonschema as the client runs it); and `whoami`, a tool
  that does nothing, as the MCP round trip every call pays;
- `run_query` over raw HTTP on a second server started alongside with the connection pool and the
  catalogue cache switched off (`DATA_AGENT_POOL_SIZE_PER_SOURCE=0`,
  `DATA_AGENT_CATALOGUE_CACHE_SIZE=0`): Gatehouse as it was before them, in the same rounds.

Iterations are spread over rounds that alternate between the measurements, so a noisy neighbour
hurts them all alike. Prints p50, p95 and mean latencies in ms and the overhead's breakdown. A
measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import aiohttp
import httpx2
import psycopg
from bench_support import (
    BASE_DIR,
    access_token_for_alice,
    bench_env,
    daphne_serving,
    free_port,
    prepare_database,
)
from jsonschema.validators import validator_for
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

PROTOCOL_VERSION = "2025-11-25"
SCOPES = "mcp:read mcp:write ontologies:read data_agent:write"
ROUNDS = 5
WARMUP = 3

REVENUE_BY_REGION = (
    "SELECT r.name AS region, count(DISTINCT o.id) AS orders, sum(l.quantity * l.unit_price) AS revenue"
    " FROM orders o JOIN customers c ON c.id = o.customer_id JOIN regions r ON r.id = c.region_id"
    " JOIN order_lines l ON l.order_id = o.id"
    " WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01'"
    " GROUP BY r.name ORDER BY r.name"
)
POINT_LOOKUP = "SELECT id, name, email, segment, region_id, signup_date FROM customers WHERE id = 42"
EVERY_ORDER_LINE = "SELECT id, order_id, product_id, quantity, unit_price FROM order_lines ORDER BY id"


@dataclass(frozen=True)
class Query:
    label: str
    sql: str
    # The large result is slow end to end; it runs this fraction of --iterations.
    share: float = 1.0


QUERIES = [
    Query("revenue by region (4-table join, 6 rows)", REVENUE_BY_REGION),
    Query("point lookup (1 row)", POINT_LOOKUP),
    Query("every order line (~5,000 rows)", EVERY_ORDER_LINE, share=0.2),
]


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)

    def p50(self) -> float:
        return statistics.median(self.seconds) * 1000

    def p95(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000

    def mean(self) -> float:
        return statistics.fmean(self.seconds) * 1000

    def cell(self) -> str:
        return f"{self.p50():.2f} / {self.p95():.2f} / {self.mean():.2f}"


def django_setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()


def mint_token(resource: str) -> str:
    """An access token for alice in acme with the data agent's scopes."""
    return access_token_for_alice(scope=SCOPES, resource=resource)


@dataclass(frozen=True)
class Sample:
    """Acme's ready ontology and what the tool reads about it."""

    tenant_id: int
    ontology_id: str
    url: str
    allowed_tables: frozenset[str]
    datasets_by_table: dict[str, str]


def acme_sample() -> Sample:
    from data_agent.models import Ontology
    from data_agent.sample import ONTOLOGY_NAME
    from data_agent.selectors import data_source_url, ontology_datasets

    ontology = Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)
    # As run_query reads them (data_agent.query_tool): the allowed tables are the datasets' own.
    datasets_by_table = {d.source_table: d.name for d in ontology_datasets(ontology=ontology)}
    return Sample(
        tenant_id=ontology.tenant_id,
        ontology_id=str(ontology.pk),
        url=data_source_url(data_source=ontology.data_source),
        allowed_tables=frozenset(datasets_by_table),
        datasets_by_table=datasets_by_table,
    )


class RawHttp:
    """One 2025-11-25 MCP session driven with plain JSON-RPC POSTs: no SDK client on this side."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str) -> None:
        self.http = http
        self.url = url
        self.headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "authorization": f"Bearer {token}",
        }
        self.next_id = 1

    async def post(self, message: dict[str, Any]) -> bytes:
        async with self.http.post(self.url, data=json.dumps(message), headers=self.headers) as response:
            body = await response.read()
            if response.status not in (200, 202):
                raise RuntimeError(f"HTTP {response.status}: {body[:300]!r}")
            if "mcp-session-id" in response.headers:
                self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
            return body

    async def open(self) -> None:
        await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            }
        )
        self.headers["mcp-protocol-version"] = PROTOCOL_VERSION
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, name: str, arguments: dict[str, Any]) -> None:
        self.next_id += 1
        body = await self.post(
            {
                "jsonrpc": "2.0",
                "id": self.next_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        if b'"result"' not in body or b'"isError":true' in body:
            raise RuntimeError(f"{name} failed: {body[:300]!r}")


Step = Callable[[], Awaitable[object]]


def list_errors(validator: Any, content: dict[str, Any]) -> list[Any]:
    return list(validator.iter_errors(content))


def sync_step(func: Callable[[], object]) -> Step:
    async def step() -> object:
        return func()

    return step


async def measure(steps: dict[str, Step], count: int, results: dict[str, Samples]) -> None:
    """One round: every step ``count`` times in turn, each call timed."""
    for name, step in steps.items():
        samples = results.setdefault(name, Samples())
        for _ in range(count):
            started = time.perf_counter()
            await step()
            samples.seconds.append(time.perf_counter() - started)


async def measure_in_rounds(steps: dict[str, Step], *, iterations: int) -> dict[str, Samples]:
    """Every step warmed up, then ``iterations`` timed calls of each, interleaved in ``ROUNDS``
    rounds so that the machine's drift falls on all of them alike."""
    results: dict[str, Samples] = {}
    for step in steps.values():
        for _ in range(WARMUP):
            await step()
    for _ in range(ROUNDS):
        await measure(steps, max(1, iterations // ROUNDS), results)
    return results


def query_steps(
    query: Query,
    sample: Sample,
    client: Client,
    raw_http: RawHttp,
    raw_http_before: RawHttp,
    once: psycopg.Connection[Any],
) -> dict[str, Step]:
    from django.conf import settings

    from core.db import db_call
    from data_agent.catalogue import catalogue_get
    from data_agent.executor import query_execute
    from data_agent.lineage import lineage_from_query
    from data_agent.query_tool import query_source_for
    from data_agent.sql_gate import sql_gate_check

    gated = sql_gate_check(sql=query.sql, dialect="postgres", allowed_tables=sample.allowed_tables)
    arguments = {"ontologyId": sample.ontology_id, "sql": query.sql}

    def raw_fresh() -> object:
        with psycopg.connect(sample.url, autocommit=True) as conn:
            return conn.execute(query.sql).fetchall()

    async def catalogue_uncached() -> object:
        # As the tool ran it before the cache: on Django's worker thread, after its health check.
        return await db_call(query_source_for, tenant_id=sample.tenant_id, ontology_id=sample.ontology_id)

    async def catalogue() -> object:
        # As the tool runs it: a version check on the hot-path pool, then this process's copy.
        return await catalogue_get(tenant_id=sample.tenant_id, ontology_id=sample.ontology_id)

    def executor_new_connection() -> object:
        # A pool size of 0: the connection opened and closed by the call, as before the pool.
        pooled = settings.GATEHOUSE["DATA_AGENT_POOL_SIZE_PER_SOURCE"]
        settings.GATEHOUSE["DATA_AGENT_POOL_SIZE_PER_SOURCE"] = 0
        try:
            return query_execute(url=sample.url, kind="postgres", sql=gated.sql)
        finally:
            settings.GATEHOUSE["DATA_AGENT_POOL_SIZE_PER_SOURCE"] = pooled

    async def sdk() -> None:
        result = await client.call_tool("run_query", arguments)
        if result.is_error:
            raise RuntimeError(f"run_query failed: {result.content}")

    return {
        "raw_once": sync_step(lambda: once.execute(query.sql).fetchall()),
        "raw_fresh": sync_step(raw_fresh),
        "catalogue": catalogue,
        "catalogue_uncached": catalogue_uncached,
        "gate": sync_step(
            lambda: sql_gate_check(sql=query.sql, dialect="postgres", allowed_tables=sample.allowed_tables)
        ),
        "executor": sync_step(lambda: query_execute(url=sample.url, kind="postgres", sql=gated.sql)),
        "executor_new_connection": sync_step(executor_new_connection),
        "lineage": sync_step(lambda: lineage_from_query(gated, datasets_by_table=sample.datasets_by_table)),
        "run_query_sdk": sdk,
        "run_query_http": lambda: raw_http.call("run_query", arguments),
        "run_query_http_before": lambda: raw_http_before.call("run_query", arguments),
    }


async def benchmark(
    *, mcp_url: str, token: str, before_url: str, before_token: str, sample: Sample, iterations: int
) -> tuple[dict[str, dict[str, Samples]], dict[str, Samples], dict[str, int]]:
    results: dict[str, dict[str, Samples]] = {query.label: {} for query in QUERIES}
    floor: dict[str, Samples] = {}
    sizes: dict[str, int] = {}
    headers = {"authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client,
        aiohttp.ClientSession() as aio,
    ):
        raw_http = RawHttp(aio, mcp_url, token)
        await raw_http.open()
        raw_http_before = RawHttp(aio, before_url, before_token)
        await raw_http_before.open()
        with psycopg.connect(sample.url, autocommit=True) as once:
            listed = await client.list_tools()
            output_schema = next(t.output_schema for t in listed.tools if t.name == "run_query")
            validator = validator_for(output_schema)(output_schema)
            plans = []
            for query in QUERIES:
                steps = query_steps(query, sample, client, raw_http, raw_http_before, once)
                answer = await client.call_tool(
                    "run_query", {"ontologyId": sample.ontology_id, "sql": query.sql}
                )
                content = answer.structured_content or {}
                sizes[query.label] = content.get("rowCount", -1)
                # What the SDK client does with every answer: check it against the tool's output schema.
                steps["validation"] = sync_step(partial(list_errors, validator, content))
                for step in steps.values():
                    for _ in range(WARMUP):
                        await step()
                plans.append((query, steps))

            async def whoami_sdk() -> None:
                await client.call_tool("whoami", {})

            floor_steps: dict[str, Step] = {
                "whoami_http": lambda: raw_http.call("whoami", {}),
                "whoami_sdk": whoami_sdk,
            }
            for step in floor_steps.values():
                for _ in range(WARMUP):
                    await step()
            for _ in range(ROUNDS):
                # Every measurement a round at a time, so a slow spell spreads over all of them.
                for query, steps in plans:
                    await measure(
                        steps, max(1, round(iterations * query.share / ROUNDS)), results[query.label]
                    )
                await measure(floor_steps, max(1, iterations // ROUNDS), floor)
    return results, floor, sizes


def report(
    results: dict[str, dict[str, Samples]], floor: dict[str, Samples], sizes: dict[str, int], iterations: int
) -> None:
    print(
        f"\nrun_query vs raw SQL, concurrency 1, loopback, {os.cpu_count()} cores; "
        f"--iterations {iterations}; p50 / p95 / mean in ms\n"
    )
    print(
        "| query | rows | raw, one connection | raw, connection per query | run_query, SDK client "
        "| run_query, raw HTTP | overhead p50 vs one conn. / vs conn. per query |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, samples in results.items():
        once, fresh, sdk = samples["raw_once"], samples["raw_fresh"], samples["run_query_sdk"]
        print(
            f"| {label} | {sizes[label]:,} | {once.cell()} | {fresh.cell()} | {sdk.cell()} "
            f"| {samples['run_query_http'].cell()} "
            f"| {sdk.p50() - once.p50():+.2f} / {sdk.p50() - fresh.p50():+.2f} |"
        )
    print(
        "\nwhoami, a tool that does nothing (the MCP round trip: HTTP, token, session, audit row): "
        f"raw HTTP {floor['whoami_http'].cell()}, SDK client {floor['whoami_sdk'].cell()}"
    )
    print(
        "\nThe connection pool and the catalogue cache: as shipped against switched off "
        "(pool size 0, cache size 0), in the same rounds; p50 / p95 / mean in ms\n"
    )
    print(
        "| query | executor, new connection | executor, pooled | catalogue, read afresh "
        "| catalogue, cached | run_query raw HTTP, both off | run_query raw HTTP, as shipped | saved (p50) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, samples in results.items():
        before, after = samples["run_query_http_before"], samples["run_query_http"]
        print(
            f"| {label} | {samples['executor_new_connection'].cell()} | {samples['executor'].cell()} "
            f"| {samples['catalogue_uncached'].cell()} | {samples['catalogue'].cell()} "
            f"| {before.cell()} | {after.cell()} | {before.p50() - after.p50():+.2f} |"
        )
    print("\nWhere the overhead goes (p50 ms; in-process parts timed alone, differences of medians):\n")
    print(
        "| query | overhead | executor over raw SQL on one connection | catalogue lookup | gate (sqlglot) "
        "| lineage | MCP round trip | SDK client (of which output-schema check) | rest |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, samples in results.items():
        p50 = {name: s.p50() for name, s in samples.items()}
        overhead = p50["run_query_sdk"] - p50["raw_once"]
        client_side = p50["run_query_sdk"] - p50["run_query_http"]
        parts = [
            p50["executor"] - p50["raw_once"],
            p50["catalogue"],
            p50["gate"],
            p50["lineage"],
            floor["whoami_http"].p50(),
        ]
        rest = overhead - sum(parts) - client_side
        cells = [f"{part:.2f}" for part in parts]
        cells += [f"{client_side:.2f} ({p50['validation']:.2f})", f"{rest:.2f}"]
        print(f"| {label} | {overhead:.2f} | " + " | ".join(cells) + " |")
    print(
        "\noverhead: run_query through the SDK client minus raw SQL on one connection. executor over "
        "raw SQL: query_execute on a pooled connection minus raw SQL on one connection (read-only "
        "transaction, statement timeout, server-side cursor, JSON-safe values, the connection's reset). "
        "catalogue lookup: catalogue_get as the tool calls it (a version check, then the cached copy). "
        "MCP round trip: whoami over raw HTTP (HTTP, token, session, audit row). SDK client: run_query "
        "through the SDK client minus over raw HTTP; the output-schema check is jsonschema's, timed "
        "alone. rest: the server building, serializing and sending a bigger answer (and auditing a "
        "bigger call), and noise."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=300,
        help="timed calls per measurement for the small queries; the 5,000-row query runs a fifth",
    )
    args = parser.parse_args()

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    env = bench_env(public=public, name="rq")
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    token = mint_token(f"{public}/mcp")
    sample = acme_sample()

    # The same database and key, with the pool and the cache off: Gatehouse as it was before them.
    before_port = free_port()
    before_public = f"http://127.0.0.1:{before_port}"
    before_env = {
        **env,
        "PUBLIC_URL": before_public,
        "DATA_AGENT_POOL_SIZE_PER_SOURCE": "0",
        "DATA_AGENT_CATALOGUE_CACHE_SIZE": "0",
    }
    before_token = mint_token(f"{before_public}/mcp")

    with daphne_serving(port=port, env=env), daphne_serving(port=before_port, env=before_env):
        print(f"Measuring ({args.iterations} iterations)...", file=sys.stderr)
        results, floor, sizes = asyncio.run(
            benchmark(
                mcp_url=f"{public}/mcp",
                token=token,
                before_url=f"{before_public}/mcp",
                before_token=before_token,
                sample=sample,
                iterations=args.iterations,
            )
        )
    report(results, floor, sizes, args.iterations)


if __name__ == "__main__":
    main()

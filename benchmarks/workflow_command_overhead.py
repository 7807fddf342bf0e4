"""What `execute_command` costs over calling the same thing directly.

    .venv/bin/python benchmarks/workflow_command_overhead.py [--iterations 200]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_wf: migrated, then `bootstrap_demo`, which fills
acme's sample database and imports the demo "Sales analyst" workflow), starts Gatehouse under Daphne
as shipped (auditing on; rate limits off so the loop is never refused), mints alice (acme admin) an
access token as the OAuth flow would have issued it, and calls `initialize` once per client.

Then it times, one call at a time, each pair side by side in the same rounds:

- a query command, `customers/CustomersInRegion <region>Nordics</region>`, against `run_query` with
  the same SQL and the value written in;
- a tool command, `customers/WhoAmI`, against `whoami` itself;

each through the official MCP SDK client and as raw JSON-RPC POSTs (aiohttp). What
`execute_command` adds: the session's binding and the turn lock (two row updates), resolving the
command (the workflow's rows, parsing, coercion), binding the parameters, two audit rows more (the
command, and a tool command's tool), and the turn written to the conversation.

Prints p50, p95 and mean latencies in ms and the overhead of each pair. A measurement, not a test:
it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import aiohttp
import httpx2
from bench_support import access_token_for_alice, bench_env, daphne_serving, free_port, prepare_database
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from run_query_overhead import RawHttp, Samples, Step, django_setup, measure_in_rounds

SCOPES = "mcp:read mcp:write ontologies:read data_agent:write workflows:read workflows:run"
NORDICS_SQL = (
    "SELECT c.name, c.segment, c.signup_date FROM customers c JOIN regions r ON r.id = c.region_id"
    " WHERE r.name = 'Nordics' ORDER BY c.name"
)
NORDICS_COMMAND = "customers/CustomersInRegion <region>Nordics</region>"
PAIRS = [
    ("query: CustomersInRegion vs run_query", "run_query", "nordics"),
    ("tool: WhoAmI vs whoami", "whoami", "whoami"),
]


def acme_ontology_id() -> str:
    from data_agent.models import Ontology
    from data_agent.sample import ONTOLOGY_NAME

    return str(Ontology.objects.get(tenant__slug="acme", name=ONTOLOGY_NAME).pk)


async def benchmark(*, mcp_url: str, token: str, ontology_id: str, iterations: int) -> dict[str, Samples]:
    direct_arguments: dict[str, tuple[str, dict[str, Any]]] = {
        "run_query": ("run_query", {"ontologyId": ontology_id, "sql": NORDICS_SQL}),
        "whoami": ("whoami", {}),
    }
    commands = {"nordics": NORDICS_COMMAND, "whoami": "customers/WhoAmI"}
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client,
        aiohttp.ClientSession() as aio,
    ):
        raw = RawHttp(aio, mcp_url, token)
        await raw.open()
        await raw.call("initialize", {})
        await client.call_tool("initialize", {})

        def sdk_step(name: str, arguments: dict[str, Any]) -> Step:
            async def step() -> None:
                result = await client.call_tool(name, arguments)
                if result.is_error or (result.structured_content or {}).get("success") is False:
                    raise RuntimeError(f"{name} failed: {result.content}")

            return step

        def raw_step(name: str, arguments: dict[str, Any]) -> Step:
            return lambda: raw.call(name, arguments)

        steps: dict[str, Step] = {}
        for _, direct, command in PAIRS:
            name, arguments = direct_arguments[direct]
            steps[f"{direct}_sdk"] = sdk_step(name, arguments)
            steps[f"{direct}_http"] = raw_step(name, arguments)
            steps[f"{command}_command_sdk"] = sdk_step("execute_command", {"command": commands[command]})
            steps[f"{command}_command_http"] = raw_step("execute_command", {"command": commands[command]})
        return await measure_in_rounds(steps, iterations=iterations)


def report(results: dict[str, Samples], iterations: int) -> None:
    print(
        f"\nexecute_command vs the same call made directly, concurrency 1, loopback, {os.cpu_count()} "
        f"cores; --iterations {iterations}; p50 / p95 / mean in ms\n"
    )
    print("| pair | client | direct | execute_command | overhead p50 |")
    print("|---|---|---:|---:|---:|")
    for label, direct, command in PAIRS:
        for client in ("sdk", "http"):
            plain, wrapped = results[f"{direct}_{client}"], results[f"{command}_command_{client}"]
            print(
                f"| {label} | {'SDK client' if client == 'sdk' else 'raw HTTP'} | {plain.cell()} "
                f"| {wrapped.cell()} | {wrapped.p50() - plain.p50():+.2f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=200, help="timed calls per measurement")
    args = parser.parse_args()

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    env = bench_env(public=public, name="wf")
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    token = access_token_for_alice(scope=SCOPES, resource=f"{public}/mcp")
    ontology_id = acme_ontology_id()

    with daphne_serving(port=port, env=env):
        print(f"Measuring ({args.iterations} iterations)...", file=sys.stderr)
        results = asyncio.run(
            benchmark(
                mcp_url=f"{public}/mcp", token=token, ontology_id=ontology_id, iterations=args.iterations
            )
        )
    report(results, args.iterations)


if __name__ == "__main__":
    main()

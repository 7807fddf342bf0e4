"""What the LLM gateway costs per call over calling litellm directly, both answered by litellm's own
``mock_response`` (so no provider and no network: what is left is the gateway's own work).

    .venv/bin/python benchmarks/llm_gateway_overhead.py [--iterations 300]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_llm: migrated, then `bootstrap_demo`), gives acme
an OpenAI model with a stored (fake) key and turns the `llm_gateway` toolset on, starts Gatehouse
under Daphne as shipped (auditing on, Redis rate limits counted on every call but set too high to
refuse) with an LLM script that answers every gateway call through `mock_response`, and mints
alice (acme admin) one token for the API and one for /mcp.

Then it times, one call at a time, side by side in the same rounds:

- `litellm.acompletion(..., mock_response=...)` in this process: the floor;
- `POST /api/v1/llm/invoke` (aiohttp): bearer check, scope, rate limit, budget sums, key
  resolution and decryption, the litellm call, usage record, audit row, log line;
- the `llm_invoke` MCP tool, as raw JSON-RPC POSTs in one 2025-11-25 session: the same service
  behind the MCP endpoint's guard and audit trail.

Prints p50, p95 and mean in ms and the overhead of each over the floor. A measurement, not a test:
it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import aiohttp
from bench_support import access_token_for_alice, bench_env, daphne_serving, free_port, prepare_database
from run_query_overhead import RawHttp, Samples, Step, django_setup, measure_in_rounds

ANSWER = "Gatehouse is an MCP gateway."
MODEL = "openai/gpt-4o-mini"
MESSAGES = [
    {"role": "system", "content": "Answer in one sentence."},
    {"role": "user", "content": "What is Gatehouse?"},
]
INVOKE = {"provider": "openai", "model": "gpt-4o-mini", "messages": MESSAGES}


def acme_prepare() -> None:
    """An OpenAI model with a stored key for acme, and the llm_gateway toolset on."""
    from accounts.models import Tenant
    from core.crypto import secret_encrypt
    from language_models.models import LanguageModel
    from mcp_gateway.kernel.registry import default_registry
    from mcp_gateway.kernel.toolset_access import toolset_set_enabled

    acme = Tenant.objects.get(slug="acme")
    LanguageModel.objects.filter(tenant=acme, is_default=True).update(is_default=False)
    LanguageModel.objects.update_or_create(
        tenant=acme,
        name="benchmark",
        defaults={
            "model": MODEL,
            "is_default": True,
            "api_key_encrypted": secret_encrypt(plaintext="sk-benchmark-not-a-real-key"),
        },
    )
    toolset_set_enabled(tenant=acme, toolset="llm_gateway", enabled=True, registry=default_registry())


async def benchmark(*, public: str, api_token: str, mcp_token: str, iterations: int) -> dict[str, Samples]:
    import litellm

    headers = {"authorization": f"Bearer {api_token}", "content-type": "application/json"}
    body = json.dumps(INVOKE)
    async with aiohttp.ClientSession() as http:
        raw = RawHttp(http, f"{public}/mcp", mcp_token)
        await raw.open()

        async def direct() -> None:
            response = await litellm.acompletion(
                model=MODEL, messages=MESSAGES, api_key="sk-benchmark", mock_response=ANSWER
            )
            if response.choices[0].message.content != ANSWER:
                raise RuntimeError("litellm answered something else")

        async def rest() -> None:
            async with http.post(f"{public}/api/v1/llm/invoke", data=body, headers=headers) as response:
                answer = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}: {answer[:300]!r}")

        async def tool() -> None:
            await raw.call("llm_invoke", INVOKE)

        steps: dict[str, Step] = {"litellm": direct, "rest": rest, "mcp": tool}
        return await measure_in_rounds(steps, iterations=iterations)


def report(results: dict[str, Samples], iterations: int) -> None:
    floor = results["litellm"]
    print(
        f"\nLLM gateway vs litellm directly, both mock_response; concurrency 1, loopback, "
        f"{os.cpu_count()} cores; --iterations {iterations}; p50 / p95 / mean in ms\n"
    )
    print("| call | p50 / p95 / mean | overhead p50 |")
    print("|---|---:|---:|")
    labels = {
        "litellm": "litellm.acompletion (in process)",
        "rest": "POST /api/v1/llm/invoke",
        "mcp": "llm_invoke MCP tool (raw JSON-RPC)",
    }
    for name, label in labels.items():
        overhead = "" if name == "litellm" else f"{results[name].p50() - floor.p50():+.2f}"
        print(f"| {label} | {results[name].cell()} | {overhead} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=300, help="timed calls per measurement")
    args = parser.parse_args()

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    script = Path(tempfile.mkdtemp(prefix="gatehouse-bench-llm-")) / "script.json"
    script.write_text(json.dumps({"responses": {"gateway": ANSWER}}))
    env = bench_env(
        public=public,
        name="llm",
        # Counted on every call, never reached: the limiter's cost is in the figures.
        RATE_LIMIT_TOOL="1000000/minute",
        RATE_LIMIT_TOOL_EXPENSIVE="1000000/minute",
        LLM_MOCK_RESPONSES_FILE=str(script),
    )
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    acme_prepare()
    scope = "mcp:read llm:invoke"
    api_token = access_token_for_alice(scope=scope, resource=f"{public}/api")
    mcp_token = access_token_for_alice(scope=scope, resource=f"{public}/mcp")

    with daphne_serving(port=port, env=env):
        print(f"Measuring ({args.iterations} iterations)...", file=sys.stderr)
        results = asyncio.run(
            benchmark(public=public, api_token=api_token, mcp_token=mcp_token, iterations=args.iterations)
        )
    report(results, args.iterations)


if __name__ == "__main__":
    main()

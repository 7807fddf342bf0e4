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
- `language_models.completion.llm_complete` in this process: the bare completion (the model
  string and key checks, the script player, the timeout, the log line and counters), which only
  the governed path may call;
- `language_models.governed.model_complete` in this process, as alice: the bare completion plus
  the governed path every model call takes (the model-call rate limit in Redis, the budgets with
  the call's reservation under the tenant's lock, the usage record completed, the `model.called`
  audit row);
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
from typing import Any

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


def alice_identity() -> Any:
    from accounts.models import Membership
    from core.identity import Identity

    membership = Membership.objects.select_related("user", "tenant").get(
        user__username="alice", tenant__slug="acme"
    )
    return Identity(
        user_id=membership.user_id,
        username="alice",
        tenant_id=membership.tenant_id,
        tenant_slug="acme",
        tenant_name=membership.tenant.name,
        role=membership.role,
        scopes=frozenset({"llm:invoke"}),
        application_id=0,
        client_id="benchmark",
        client_name="benchmark",
        token_id=0,
    )


async def benchmark(
    *, public: str, api_token: str, mcp_token: str, iterations: int, identity: Any, config: Any
) -> dict[str, Samples]:
    import litellm

    from language_models.completion import llm_complete
    from language_models.governed import Feature, ModelUse, model_complete

    use = ModelUse(identity=identity, feature=Feature.API, channel="api")

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

        async def bare() -> None:
            completion = await llm_complete(config=config, messages=MESSAGES, purpose="gateway")
            if completion.text != ANSWER:
                raise RuntimeError("the completion answered something else")

        async def governed() -> None:
            completion = await model_complete(use=use, config=config, messages=MESSAGES, purpose="gateway")
            if completion.text != ANSWER:
                raise RuntimeError("the governed call answered something else")

        async def rest() -> None:
            async with http.post(f"{public}/api/v1/llm/invoke", data=body, headers=headers) as response:
                answer = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}: {answer[:300]!r}")

        async def tool() -> None:
            await raw.call("llm_invoke", INVOKE)

        steps: dict[str, Step] = {
            "litellm": direct,
            "completion": bare,
            "governed": governed,
            "rest": rest,
            "mcp": tool,
        }
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
        "completion": "llm_complete, the bare completion (in process)",
        "governed": "model_complete, the governed path (in process)",
        "rest": "POST /api/v1/llm/invoke",
        "mcp": "llm_invoke MCP tool (raw JSON-RPC)",
    }
    for name, label in labels.items():
        overhead = "" if name == "litellm" else f"{results[name].p50() - floor.p50():+.2f}"
        print(f"| {label} | {results[name].cell()} | {overhead} |")
    governance = results["governed"].p50() - results["completion"].p50()
    print(f"\nWhat the governed path adds to one model call, p50: {governance:+.2f} ms")


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
        RATE_LIMIT_MODEL="1000000/minute",
        LLM_MOCK_RESPONSES_FILE=str(script),
    )
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    acme_prepare()
    scope = "mcp:read llm:invoke"
    api_token = access_token_for_alice(scope=scope, resource=f"{public}/api")
    mcp_token = access_token_for_alice(scope=scope, resource=f"{public}/mcp")

    from language_models.selectors import language_model_for_tenant

    identity = alice_identity()
    config = language_model_for_tenant(tenant_id=identity.tenant_id)
    with daphne_serving(port=port, env=env):
        print(f"Measuring ({args.iterations} iterations)...", file=sys.stderr)
        results = asyncio.run(
            benchmark(
                public=public,
                api_token=api_token,
                mcp_token=mcp_token,
                iterations=args.iterations,
                identity=identity,
                config=config,
            )
        )
    report(results, args.iterations)


if __name__ == "__main__":
    main()

"""Whether one tenant's flood of model calls slows another tenant's.

    .venv/bin/python benchmarks/model_flood.py [--calls 300] [--rounds 3] [--flooders 16]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_model_flood: migrated, then `bootstrap_demo`) and
counts rate limits in Redis database 13 (BENCH_REDIS_URL), which no test lane or other benchmark
uses. acme and globex each get an OpenAI model with a stored (fake) key; Gatehouse runs under Daphne
as shipped (auditing on, the model-call rate limit as shipped: 60 a minute per person and feature)
with an LLM script that answers every call through litellm's `mock_response` at once, so that the
calls cost Gatehouse's own work and nothing else: the worst case for the machine, where a provider
would keep a real call waiting for seconds. carol (globex) has an operator's rule lifting her
tenant's model-call limit, so that every one of her calls is answered.

Then, in rounds, three phases, each carol calling `POST /api/v1/llm/invoke` one call after another
(aiohttp, each call timed) --calls times:

- quiet: nothing else happening;
- flood, refused: alice (acme) calls the same endpoint from --flooders connections at once, without
  pause, as shipped: past her 60 calls a minute every call is refused (429) by the governed path;
- flood, answered: the same, with an operator's rule lifting acme's model-call limit for the
  phase, so that every flood call is answered, recorded and audited like carol's.

The phases take turns, so the machine's drift falls on all three. Prints per phase carol's p50, p95
and p99 in ms, her calls per second, the flood's calls per second by status, and Daphne's CPU
(share of one core); then each flood's ratios to quiet. A measurement, not a test: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from bench_support import access_token_for_alice, bench_env, daphne_serving, free_port, prepare_database
from mcp_servers import _cpu_seconds
from run_query_overhead import WARMUP, Samples, django_setup
from upstream_flood import daphne_pid

ANSWER = "Gatehouse is an MCP gateway."
MODEL = "openai/gpt-4o-mini"
BODY = json.dumps(
    {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "What is Gatehouse?"}],
    }
)
SCOPE = "llm:invoke"
UNLIMITED = 1_000_000_000


@dataclass
class Phase:
    samples: Samples = field(default_factory=Samples)
    seconds: float = 0.0
    cpu: float = 0.0
    flood: Counter[int] = field(default_factory=Counter)

    def p99(self) -> float:
        ordered = sorted(self.samples.seconds)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def tenants_prepare() -> None:
    """A default OpenAI model with a stored key for acme and globex, and the rule that lifts
    globex's model-call limit."""
    from accounts.models import Tenant
    from core.crypto import secret_encrypt
    from core.models import RateLimitRule, RateLimitScope
    from language_models.models import LanguageModel

    for slug in ("acme", "globex"):
        tenant = Tenant.objects.get(slug=slug)
        LanguageModel.objects.filter(tenant=tenant, is_default=True).update(is_default=False)
        LanguageModel.objects.update_or_create(
            tenant=tenant,
            name="benchmark",
            defaults={
                "model": MODEL,
                "is_default": True,
                "api_key_encrypted": secret_encrypt(plaintext="sk-benchmark-not-a-real-key"),
            },
        )
    acme_limit(lifted=False)
    RateLimitRule.objects.update_or_create(
        scope=RateLimitScope.MODEL,
        target="",
        tenant=Tenant.objects.get(slug="globex"),
        defaults={"limit": UNLIMITED, "period_seconds": 60},
    )


def acme_limit(*, lifted: bool) -> None:
    from accounts.models import Tenant
    from core.models import RateLimitRule, RateLimitScope

    rules = RateLimitRule.objects.filter(scope=RateLimitScope.MODEL, tenant=Tenant.objects.get(slug="acme"))
    if lifted:
        rules.update_or_create(
            scope=RateLimitScope.MODEL,
            target="",
            tenant=Tenant.objects.get(slug="acme"),
            defaults={"limit": UNLIMITED, "period_seconds": 60},
        )
    else:
        rules.delete()


def token_for(username: str, tenant: str, *, resource: str) -> str:
    from accounts.models import Tenant, User
    from oauth.models import AccessToken

    token = access_token_for_alice(scope=SCOPE, resource=resource)
    AccessToken.objects.filter(token=token).update(
        user=User.objects.get(username=username), tenant=Tenant.objects.get(slug=tenant)
    )
    return token


async def invoke(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> int:
    async with http.post(url, data=BODY, headers=headers) as response:
        await response.read()
        return response.status


async def phase_run(
    http: aiohttp.ClientSession, *, url: str, carol: dict[str, str], alice: dict[str, str] | None,
    flooders: int, calls: int, phase: Phase, pid: int,
) -> None:  # fmt: skip
    """carol's ``calls``, timed, with alice's flood (``alice`` given) for as long as they take."""
    stop = asyncio.Event()

    async def flooding() -> None:
        assert alice is not None
        while not stop.is_set():
            phase.flood[await invoke(http, url, alice)] += 1

    flood = [asyncio.create_task(flooding()) for _ in range(flooders if alice else 0)]
    cpu, started = _cpu_seconds(pid), time.perf_counter()
    try:
        for _ in range(calls):
            began = time.perf_counter()
            status = await invoke(http, url, carol)
            phase.samples.seconds.append(time.perf_counter() - began)
            if status != 200:
                raise RuntimeError(f"carol's call answered HTTP {status}")
    finally:
        phase.seconds += time.perf_counter() - started
        phase.cpu += _cpu_seconds(pid) - cpu
        stop.set()
        await asyncio.gather(*flood)


async def benchmark(*, url: str, carol: str, alice: str, args: argparse.Namespace) -> dict[str, Phase]:
    results = {"quiet": Phase(), "flood, refused": Phase(), "flood, answered": Phase()}
    carol_headers = {"authorization": f"Bearer {carol}", "content-type": "application/json"}
    alice_headers = {"authorization": f"Bearer {alice}", "content-type": "application/json"}
    pid = daphne_pid()
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=None)
    ) as http:
        for _ in range(WARMUP):
            await invoke(http, url, carol_headers)
        for number in range(args.rounds):
            print(f"Round {number + 1} of {args.rounds}...", file=sys.stderr)
            for name, phase in results.items():
                lifted = name == "flood, answered"
                await asyncio.to_thread(acme_limit, lifted=lifted)
                await phase_run(
                    http, url=url, carol=carol_headers,
                    alice=None if name == "quiet" else alice_headers,
                    flooders=args.flooders, calls=args.calls, phase=phase, pid=pid,
                )  # fmt: skip
                if lifted:
                    await asyncio.to_thread(acme_limit, lifted=False)
    return results


def report(results: dict[str, Phase], args: argparse.Namespace) -> None:
    print(
        f"\nglobex's POST /api/v1/llm/invoke, one at a time, while acme floods the same endpoint from "
        f"{args.flooders} connections; loopback, {os.cpu_count()} cores; {args.rounds} rounds of "
        f"{args.calls} calls per phase\n"
    )
    print(
        "| phase | p50 ms | p95 ms | p99 ms | carol calls/s | acme flood calls/s (status: count) "
        "| Daphne CPU |"
    )
    print("|---|---:|---:|---:|---:|---|---:|")
    for name, phase in results.items():
        samples = phase.samples
        statuses = ", ".join(f"{status}: {count:,}" for status, count in sorted(phase.flood.items()))
        rate = sum(phase.flood.values()) / phase.seconds
        print(
            f"| {name} | {samples.p50():.2f} | {samples.p95():.2f} | {phase.p99():.2f} "
            f"| {len(samples.seconds) / phase.seconds:.0f} | {rate:.0f} ({statuses or 'none'}) "
            f"| {phase.cpu / phase.seconds:.0%} |"
        )
    calm = results["quiet"]
    for name in ("flood, refused", "flood, answered"):
        busy = results[name]
        print(
            f"| **{name} / quiet** | {busy.samples.p50() / calm.samples.p50():.2f}x "
            f"| {busy.samples.p95() / calm.samples.p95():.2f}x | {busy.p99() / calm.p99():.2f}x | | | |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=300, help="carol's calls per phase and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three phases")
    parser.add_argument("--flooders", type=int, default=16, help="alice's connections calling at once")
    args = parser.parse_args()

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    script = Path(tempfile.mkdtemp(prefix="gatehouse-bench-model-flood-")) / "script.json"
    script.write_text(json.dumps({"responses": {"gateway": ANSWER}}))
    env = bench_env(
        public=public,
        name="model_flood",
        REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"),
        LLM_MOCK_RESPONSES_FILE=str(script),
        # The operator's rules are read at each call: the phases switch acme's.
        RATE_LIMIT_RULE_CACHE_SECONDS="0",
    )
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    tenants_prepare()
    resource = f"{public}/api"
    carol = token_for("carol", "globex", resource=resource)
    alice = token_for("alice", "acme", resource=resource)
    with daphne_serving(port=port, env=env):
        print(f"Measuring ({args.rounds} rounds)...", file=sys.stderr)
        url = f"{public}/api/v1/llm/invoke"
        results = asyncio.run(benchmark(url=url, carol=carol, alice=alice, args=args))
    report(results, args)


if __name__ == "__main__":
    main()

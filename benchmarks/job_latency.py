"""What the job queue costs a literature search's steps: the wait between a tool call and its
checkpoint, with the worker polling the queue every second (db_worker's default), every 0.2 s
(jobs_worker's default) and every 0.1 s, against the same steps' work run in-process with no queue.

    .venv/bin/python benchmarks/job_latency.py [--iterations 30] [--intervals 1,0.2,0.1] [--think 0]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_jobs: migrated, then `bootstrap_demo`), fills
acme's literature library from the demo bibliography (`research.demo.library_demo_ensure`) and
turns the `research` toolset on for acme, starts Gatehouse under Daphne as shipped with
RESEARCH_SOURCES=library (so nothing touches the network) and mints alice (acme admin) a token.

Then, through the official SDK client, one call at a time, it times:

- (a) `search_papers` until its answer holds the plan checkpoint: the tool starts the job (its first
  step enqueued), a worker takes the step from the queue and runs it, and the tool, which reads the
  job's row every `research.tools.POLL_SECONDS`, sees the checkpoint;
- (b) `decide approve` at the plan until its answer holds the screening checkpoint: the same, with
  a real search of the tenant's library as the step;

with a `manage.py jobs_worker --interval X` for each interval, and, as the floor, the two steps'
work run in this process without the queue (`literature_search.run_step` on a `JobView`), plus
`get_session` (one tool call reading the job's row: the MCP round trip every call pays). The
iterations are spread over rounds; each round starts a fresh worker for each interval in turn (one
untimed warm-up search first) and stops it after, so only one worker polls at a time and the
machine's drift falls on all lines alike. By default each call follows the last at once, so it
lands just after the worker's last look at the queue (its worst case); `--think S` waits a random
0 to S seconds first, as a person or a model reading the checkpoint would. Prints p50 and p95 in ms; it
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from bench_support import (
    BASE_DIR,
    PYTHON,
    access_token_for_alice,
    bench_env,
    daphne_serving,
    free_port,
    prepare_database,
)
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from run_query_overhead import ROUNDS, Samples, django_setup

QUERY = "deep learning"
SCOPES = "mcp:read mcp:write"


def acme_prepare() -> tuple[int, int]:
    """acme's library filled and the research toolset on; acme's and alice's ids."""
    from accounts.models import Tenant, User
    from mcp_gateway.kernel.registry import default_registry
    from mcp_gateway.kernel.toolset_access import toolset_set_enabled
    from research.demo import TOOLSET, library_demo_ensure

    acme = Tenant.objects.get(slug="acme")
    library_demo_ensure(tenant_id=acme.pk)
    toolset_set_enabled(tenant=acme, toolset=TOOLSET, enabled=True, registry=default_registry())
    return acme.pk, User.objects.get(username="alice").pk


@contextmanager
def jobs_worker(*, env: dict[str, str], interval: float) -> Iterator[None]:
    """One ``manage.py jobs_worker --interval <interval>`` for the block, polling once it is up."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [
                PYTHON,
                "manage.py",
                "jobs_worker",
                "--interval",
                str(interval),
                "--no-startup-delay",
                "--worker-id",
                f"bench-{interval}",
                "-v",
                "2",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

        def output() -> str:
            log.seek(0)
            return log.read().decode(errors="replace")

        try:
            deadline = time.monotonic() + 60
            while "Starting worker" not in output():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the jobs worker did not start:\n{output()[-4000:]}")
                time.sleep(0.05)
            yield
        except BaseException:
            sys.stderr.write(output()[-4000:])
            raise
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _checkpoint_of(result: Any, expected: str) -> str:
    content = result.structured_content or {}
    kind = (content.get("checkpoint") or {}).get("kind")
    if result.is_error or kind != expected:
        raise RuntimeError(f"expected the {expected} checkpoint, got {content}")
    return str(content["session_id"])


async def one_search(client: Client, samples: dict[str, Samples] | None, label: str, think: float) -> None:
    """(a) then (b), timed into ``samples`` unless it is None (a warm-up); then get_session, and the
    job cancelled so that nothing is left waiting. Before each timed call, an untimed pause of up to
    ``think`` seconds: a person (or a model) reading the checkpoint, so the call lands anywhere in
    the worker's sleep instead of just after its last poll."""
    await asyncio.sleep(random.uniform(0, think))  # noqa: S311 (not for security)
    started = time.perf_counter()
    result = await client.call_tool("search_papers", {"query": QUERY, "max_results": 50})
    planned = time.perf_counter()
    session_id = _checkpoint_of(result, "plan")
    await asyncio.sleep(random.uniform(0, think))  # noqa: S311
    deciding = time.perf_counter()
    decided = await client.call_tool("decide", {"session_id": session_id, "action": "approve"})
    screened = time.perf_counter()
    _checkpoint_of(decided, "screening")
    before_get = time.perf_counter()
    state = await client.call_tool("get_session", {"session_id": session_id})
    got = time.perf_counter()
    if state.is_error:
        raise RuntimeError(f"get_session failed: {state.structured_content}")
    await client.call_tool("cancel_session", {"session_id": session_id})
    if samples is not None:
        samples.setdefault(f"{label}|plan", Samples()).seconds.append(planned - started)
        samples.setdefault(f"{label}|screening", Samples()).seconds.append(screened - deciding)
        samples.setdefault("get_session", Samples()).seconds.append(got - before_get)


def in_process_round(*, tenant_id: int, user_id: int, count: int, samples: dict[str, Samples]) -> None:
    """The two steps' work with no queue: the kind's run_step on a JobView, as a worker calls it
    (an unsaved job row: run_step only reads the view and the tenant's library)."""
    from jobs.kinds import NextStep
    from jobs.models import Job
    from jobs.steps import job_view
    from research.literature_job import KIND, PLAN, literature_search

    def report(message: str) -> None:
        pass

    job_input = literature_search.validate_input(job_input={"query": QUERY, "max_results": 50})
    for _ in range(count):
        job = Job(tenant_id=tenant_id, user_id=user_id, kind=KIND, input=job_input, context={})
        started = time.perf_counter()
        checkpoint = literature_search.run_step(job=job_view(job), step="plan", report=report)
        planned = time.perf_counter()
        job.checkpoint_kind, job.checkpoint, job.context = PLAN, checkpoint.payload, checkpoint.context
        following = literature_search.decide(job=job_view(job), action="approve", data=None)
        if not isinstance(following, NextStep):
            raise RuntimeError(f"approving the plan should search, not {following!r}")
        job.context = following.context
        before_search = time.perf_counter()
        screening = literature_search.run_step(job=job_view(job), step=following.step, report=report)
        searched = time.perf_counter()
        if not screening.context.get("candidates"):
            raise RuntimeError("the library search found nothing; is the library filled?")
        samples.setdefault("in-process|plan", Samples()).seconds.append(planned - started)
        samples.setdefault("in-process|screening", Samples()).seconds.append(searched - before_search)


async def benchmark(
    *,
    mcp_url: str,
    token: str,
    env: dict[str, str],
    intervals: list[float],
    iterations: int,
    think: float,
    tenant_id: int,
    user_id: int,
) -> dict[str, Samples]:
    samples: dict[str, Samples] = {}
    per_round = max(1, iterations // ROUNDS)
    headers = {"authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client,
    ):
        await asyncio.to_thread(in_process_round, tenant_id=tenant_id, user_id=user_id, count=3, samples={})
        for number in range(ROUNDS):
            print(f"  round {number + 1}/{ROUNDS}", file=sys.stderr)
            for interval in intervals:
                with jobs_worker(env=env, interval=interval):
                    await one_search(client, None, "", 0)
                    for _ in range(per_round):
                        await one_search(client, samples, f"--interval {interval:g}", think)
            await asyncio.to_thread(
                in_process_round, tenant_id=tenant_id, user_id=user_id, count=per_round, samples=samples
            )
    return samples


def report(
    samples: dict[str, Samples], *, intervals: list[float], iterations: int, think: float, poll: float
) -> None:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"\nJob latency, literature search on the tenant library, one call at a time; loopback, "
        f"PostgreSQL, {os.cpu_count()} cores, load average {load}; --iterations {iterations} "
        f"({ROUNDS} rounds); --think {think:g}; the tools poll the job row every {poll:g} s\n"
    )
    print("| path | (a) search_papers → plan: p50 / p95 ms | (b) decide approve → screening: p50 / p95 ms |")
    print("|---|---:|---:|")
    labels = [f"--interval {interval:g}" for interval in intervals]
    rows = [(f"tool through the queue, jobs_worker {label}", label) for label in labels]
    rows.append(("in-process run_step, no queue (floor)", "in-process"))
    for title, label in rows:
        plan, screening = samples[f"{label}|plan"], samples[f"{label}|screening"]
        print(
            f"| {title} | {plan.p50():.1f} / {plan.p95():.1f} "
            f"| {screening.p50():.1f} / {screening.p95():.1f} |"
        )
    get_session = samples["get_session"]
    print(
        f"\nget_session (one tool call reading the job row: the MCP round trip): "
        f"{get_session.p50():.1f} / {get_session.p95():.1f} ms"
    )
    floor_plan = samples["in-process|plan"].p50()
    floor_screening = samples["in-process|screening"].p50()
    for label in labels:
        print(
            f"queue's cost at p50 ({label}): (a) {samples[f'{label}|plan'].p50() - floor_plan:+.1f} ms, "
            f"(b) {samples[f'{label}|screening'].p50() - floor_screening:+.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=30, help="timed searches per worker interval")
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="an untimed random pause of up to this many seconds before each timed call (default 0)",
    )
    parser.add_argument(
        "--intervals", default="1,0.2,0.1", help="comma-separated jobs_worker --interval values"
    )
    args = parser.parse_args()
    intervals = [float(value) for value in args.intervals.split(",") if value.strip()]

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    # Only the tenant's library: nothing reaches the network. The worker reads the same settings.
    env = bench_env(public=public, name="jobs", RESEARCH_SOURCES="library")
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    tenant_id, user_id = acme_prepare()
    token = access_token_for_alice(scope=SCOPES, resource=f"{public}/mcp")

    from research.tools import POLL_SECONDS

    with daphne_serving(port=port, env=env):
        print(f"Measuring ({args.iterations} searches per interval)...", file=sys.stderr)
        samples = asyncio.run(
            benchmark(
                mcp_url=f"{public}/mcp",
                token=token,
                env=env,
                intervals=intervals,
                iterations=args.iterations,
                think=args.think,
                tenant_id=tenant_id,
                user_id=user_id,
            )
        )
    report(samples, intervals=intervals, iterations=args.iterations, think=args.think, poll=POLL_SECONDS)


if __name__ == "__main__":
    main()

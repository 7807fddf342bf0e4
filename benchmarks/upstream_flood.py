"""Whether one upstream MCP server's flood of `notifications/tools/list_changed` slows another tenant.

    .venv/bin/python benchmarks/upstream_flood.py [--iterations 1500] [--count 10000] [--rounds 3]
        [--concurrency 1,4] [--listeners 5] [--cooldown SECONDS]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_flood: migrated, then `bootstrap_demo`) and
counts rate limits in Redis database 14 (BENCH_REDIS_URL), which no test lane or other benchmark
uses. It gives acme an upstream row, `flooder`, that runs the upstream test server
(`tests/support/upstream_server.py`) over stdio as Gatehouse's own child (prefix on, so its tool is
`flooder_flood_list_changed`), starts Gatehouse under Daphne as shipped (auditing on, rate limits
off) and mints tokens for alice (acme admin) and carol (globex admin).

A second process holds --listeners 2025-11-25 sessions of alice's with their standalone
`GET /mcp` stream open, and reads every frame: the open streams of the tenant that each logged
change is sent to (three frames a change: tools, prompts and resources).

Then, in rounds, at each concurrency, two phases, each carol's workers calling `whoami` one call
after another (one 2025-11-25 session per worker, raw JSON-RPC POSTs over aiohttp as the other
benchmarks do, each call timed):

- quiet: --iterations calls in all (spread over the rounds), nothing else happening;
- flood: alice calls `flooder_flood_list_changed` with --count through Gatehouse, so that
  Gatehouse's pooled session with the upstream hears that many notifications, while carol's
  workers keep calling. The phase lasts until alice's call has returned and acme's change log and
  its listeners' frames have stopped growing; the calls carol started before then are kept.
  Gatehouse ends the session of an upstream that floods past its bound, failing alice's call
  (counted per phase as "sessions ended"), and opens none for UPSTREAM_FLOOD_COOLDOWN_SECONDS
  (--cooldown; 0 measures a reconnection, a new upstream process, at every flood): a flood call in
  the cooldown is refused at once ("refused cooling").

Quiet and flood take turns, so the machine's drift falls on both. Prints per phase p50, p95 and
p99 in ms, carol's calls per second, acme's change-log rows (`ChangeEvent`, kind upstream) and the
list_changed frames the listeners read per flood, the CPU of Daphne and of the upstream's process
(share of one core), and the ratios of flood to quiet; then `gatehouse_upstream_notifications_total`
from /metrics (which Gatehouse before the coalescing does not have) and how often the server ended
a listening stream whose client fell behind. A measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import NamedTuple

import aiohttp
from bench_support import (
    BASE_DIR,
    PYTHON,
    access_token_for_alice,
    bench_env,
    daphne_serving,
    free_port,
    prepare_database,
)
from mcp_servers import _cpu_seconds, _process_tree
from prometheus_client.parser import text_string_to_metric_families
from run_query_overhead import WARMUP, RawHttp, Samples, django_setup

UPSTREAM_NAME = "flooder"
FLOOD_TOOL = f"{UPSTREAM_NAME}_flood_list_changed"
SCOPE = "mcp:read mcp:write"
# Longer than the coalescing window (upstreams.list_changes, 1 s): once the call has returned, a log
# and streams that have not grown for this long have logged and sent the flood's last change.
SETTLE_SECONDS = 1.5
POLL_SECONDS = 0.1


@dataclass
class Phase:
    """One phase at one concurrency over all rounds."""

    samples: Samples = field(default_factory=Samples)
    seconds: float = 0.0
    rows: int = 0
    frames: int = 0
    daphne_cpu: float = 0.0
    upstream_cpu: float = 0.0
    runs: int = 0
    # Floods whose call Gatehouse failed by ending the upstream's session, and those refused at
    # once during the cooldown that follows.
    ended: int = 0
    cooling: int = 0

    def add(self, first: Reading, last: Reading, *, cpu_until: Reading) -> None:
        self.rows += last.rows - first.rows
        self.frames += last.frames - first.frames
        self.daphne_cpu += cpu_until.daphne_cpu - first.daphne_cpu
        self.upstream_cpu += cpu_until.upstream_cpu - first.upstream_cpu
        self.runs += 1

    def p99(self) -> float:
        ordered = sorted(self.samples.seconds)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000

    def calls_per_second(self) -> float:
        return len(self.samples.seconds) / self.seconds if self.seconds else 0.0


class Reading(NamedTuple):
    at: float
    rows: int
    frames: int
    daphne_cpu: float
    upstream_cpu: float


@dataclass
class Server:
    """What a phase reads about the server: acme's change-log rows, the frames the listeners
    read, and the CPU time of Daphne and of the upstream's process (its child)."""

    acme_id: int
    daphne_pid: int
    frames: Synchronized[int]
    # Each upstream process's CPU as last read: an ended session's process is gone, its CPU is not.
    upstream_seen: dict[int, float] = field(default_factory=dict)

    def rows(self) -> int:
        from mcp_gateway.models import ChangeEvent, ChangeKind

        return ChangeEvent.objects.filter(tenant_id=self.acme_id, kind=ChangeKind.UPSTREAM).count()

    def upstream_cpu(self) -> float:
        for pid in _process_tree(self.daphne_pid)[1:]:
            if b"upstream_server.py" in _cmdline(pid):
                self.upstream_seen[pid] = max(self.upstream_seen.get(pid, 0.0), _cpu_seconds(pid))
        return sum(self.upstream_seen.values())

    async def reading(self) -> Reading:
        rows = await asyncio.to_thread(self.rows)
        return Reading(
            time.perf_counter(), rows, self.frames.value, _cpu_seconds(self.daphne_pid), self.upstream_cpu()
        )


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def acme_prepare() -> int:
    """acme's flooding upstream (the test server over stdio, started by Gatehouse); acme's id."""
    from accounts.models import Tenant
    from upstreams.models import Transport, Upstream

    acme = Tenant.objects.get(slug="acme")
    Upstream.objects.update_or_create(
        tenant=acme,
        name=UPSTREAM_NAME,
        defaults={
            "transport": Transport.STDIO,
            "command": PYTHON,
            "args": [str(BASE_DIR / "tests" / "support" / "upstream_server.py"), "stdio"],
            "prefix_tools": True,
            "tool_names": [FLOOD_TOOL],
            # The flood's call answers once its notifications are sent: seconds here, more room for
            # a slow machine than the default 60 s.
            "call_timeout_seconds": 600,
        },
    )
    return acme.pk


def access_token_for_carol(*, resource: str) -> str:
    """carol's (globex admin) token: alice's kind of token, moved to her."""
    from accounts.models import Tenant, User
    from oauth.models import AccessToken

    token = access_token_for_alice(scope=SCOPE, resource=resource)
    AccessToken.objects.filter(token=token).update(
        user=User.objects.get(username="carol"), tenant=Tenant.objects.get(slug="globex")
    )
    return token


def listeners_run(
    url: str, token: str, count: int, frames: Synchronized[int], opened: Synchronized[int]
) -> None:
    """``count`` sessions' standalone streams, read to the end (in a process of its own, so that
    reading the frames does not slow the timed client)."""
    asyncio.run(_listen(url, token, count, frames, opened))


async def _listen(
    url: str, token: str, count: int, frames: Synchronized[int], opened: Synchronized[int]
) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:

        async def stream(raw: RawHttp) -> None:
            await raw.open()
            headers = {**raw.headers, "accept": "text/event-stream"}
            # A stream the server ends (its client fell behind) is opened again, as a client would.
            while True:
                async with http.get(url, headers=headers) as response:
                    if response.status != 200:
                        raise RuntimeError(f"GET /mcp: HTTP {response.status}")
                    with opened.get_lock():
                        opened.value += 1
                    async for line in response.content:
                        if line.startswith(b"data:") and b"list_changed" in line:
                            with frames.get_lock():
                                frames.value += 1

        await asyncio.gather(*(stream(RawHttp(http, url, token)) for _ in range(count)))


async def whoami_until(
    workers: list[RawHttp], *, calls: int | None, stop: asyncio.Event
) -> list[tuple[float, float]]:
    """Each worker calls whoami ``calls`` times, or until ``stop``; (start, seconds) of each call."""
    timed: list[tuple[float, float]] = []

    async def worker(raw: RawHttp) -> None:
        made = 0
        while (calls is None or made < calls) and not stop.is_set():
            started = time.perf_counter()
            await raw.call("whoami", {})
            timed.append((started, time.perf_counter() - started))
            made += 1

    await asyncio.gather(*(worker(raw) for raw in workers))
    return timed


async def quiet(workers: list[RawHttp], server: Server, calls: int, phase: Phase) -> None:
    first = await server.reading()
    timed = await whoami_until(workers, calls=max(1, calls // len(workers)), stop=asyncio.Event())
    last = await server.reading()
    phase.samples.seconds.extend(seconds for _, seconds in timed)
    phase.seconds += last.at - first.at
    phase.add(first, last, cpu_until=last)


async def flood(flooder: RawHttp, workers: list[RawHttp], server: Server, count: int, phase: Phase) -> None:
    """The flood, carol's calls during it, and what it left in the log and sent to the streams."""
    first = await server.reading()
    stop = asyncio.Event()
    calling = asyncio.create_task(whoami_until(workers, calls=None, stop=stop))
    sending = asyncio.create_task(flooder.call(FLOOD_TOOL, {"count": count}))
    returned = grown = first.at
    readings = [first]
    try:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            reading = await server.reading()
            if reading[1:3] != readings[-1][1:3]:
                grown = reading.at
            readings.append(reading)
            if sending.done() and returned == first.at:
                returned = reading.at
            if sending.done() and reading.at - max(returned, grown) >= SETTLE_SECONDS:
                break
        try:
            await sending
        except RuntimeError as error:
            # Past its bound, Gatehouse ends the flooding upstream's session and the call says so
            # (upstreams.list_changes); Gatehouse before the bound reads all of them.
            if "ended its session" in str(error):
                phase.ended += 1
            elif "connects to it again" in str(error):
                phase.cooling += 1
            else:
                raise
    finally:
        stop.set()
        timed = await calling
    ended = max(returned, grown)
    phase.samples.seconds.extend(seconds for started, seconds in timed if started < ended)
    phase.seconds += ended - first.at
    # Rows and frames to the end; CPU to the first reading at the flood's end.
    phase.add(first, readings[-1], cpu_until=next(r for r in readings if r.at >= ended))


async def benchmark(
    *, url: str, alice: str, carol: str, server: Server, args: argparse.Namespace
) -> dict[int, dict[str, Phase]]:
    results: dict[int, dict[str, Phase]] = {}
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=None)
    ) as http:
        flooder = RawHttp(http, url, alice)
        await flooder.open()
        levels: dict[int, list[RawHttp]] = {}
        for workers in args.concurrency:
            levels[workers] = [RawHttp(http, url, carol) for _ in range(workers)]
            for raw in levels[workers]:
                await raw.open()
            await whoami_until(levels[workers], calls=WARMUP, stop=asyncio.Event())
            results[workers] = {"quiet": Phase(), "flood": Phase()}
        # Gatehouse starts the upstream's process and its pooled session on the first call.
        await flood(flooder, levels[args.concurrency[0]], server, 1, Phase())
        for number in range(args.rounds):
            print(f"Round {number + 1} of {args.rounds}...", file=sys.stderr)
            for workers, clients in levels.items():
                phases = results[workers]
                await quiet(clients, server, args.iterations // args.rounds, phases["quiet"])
                await flood(flooder, clients, server, args.count, phases["flood"])
    return results


async def notifications_counted(public: str) -> dict[str, float]:
    """gatehouse_upstream_notifications_total of the flooding upstream, by outcome."""
    async with aiohttp.ClientSession() as http, http.get(f"{public}/metrics") as response:
        text = await response.text()
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "gatehouse_upstream_notifications_total"
        and sample.labels.get("upstream") == f"acme/{UPSTREAM_NAME}"
    }


def report(
    results: dict[int, dict[str, Phase]], counted: dict[str, float], reopened: int, args: argparse.Namespace
) -> None:
    print(
        f"\nglobex's whoami while acme's upstream sends {args.count:,} tools/list_changed (flood) and "
        f"without (quiet); loopback, {os.cpu_count()} cores; {args.rounds} rounds; "
        f"--iterations {args.iterations}; {args.listeners} acme streams listening\n"
    )
    print(
        "| concurrency | phase | calls | p50 ms | p95 ms | p99 ms | max ms | calls/s | s per phase "
        "| change-log rows per phase | frames per phase | Daphne CPU | upstream CPU | sessions ended "
        "| refused cooling |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for workers, phases in results.items():
        for name, phase in phases.items():
            samples = phase.samples
            print(
                f"| {workers} | {name} | {len(samples.seconds)} | {samples.p50():.2f} | {samples.p95():.2f} "
                f"| {phase.p99():.2f} | {max(samples.seconds) * 1000:.0f} | {phase.calls_per_second():.0f} "
                f"| {phase.seconds / phase.runs:.1f} | {phase.rows / phase.runs:.1f} "
                f"| {phase.frames / phase.runs:.0f} | {phase.daphne_cpu / phase.seconds:.0%} "
                f"| {phase.upstream_cpu / phase.seconds:.0%} | {phase.ended} | {phase.cooling} |"
            )
        calm, busy = phases["quiet"], phases["flood"]
        print(
            f"| {workers} | **flood / quiet** | | {busy.samples.p50() / calm.samples.p50():.2f}x "
            f"| {busy.samples.p95() / calm.samples.p95():.2f}x | {busy.p99() / calm.p99():.2f}x "
            "| | | | | | | | | |"
        )
    floods = sum(phases["flood"].runs for phases in results.values()) + 1
    if counted:
        described = ", ".join(f"{outcome} {value:,.0f}" for outcome, value in sorted(counted.items()))
        print(f"\ngatehouse_upstream_notifications_total, {floods} floods with the warm-up: {described}")
    else:
        print("\ngatehouse_upstream_notifications_total: not reported by this Gatehouse")
    print(f"acme's listening streams ended by the server (their client behind) and opened again: {reopened}")


def daphne_pid() -> int:
    for pid in _process_tree(os.getpid())[1:]:
        if b"daphne" in _cmdline(pid):
            return pid
    raise RuntimeError("Daphne's process was not found")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--iterations", type=int, default=1500, help="quiet whoami calls per concurrency, over the rounds"
    )
    parser.add_argument("--count", type=int, default=10_000, help="notifications per flood (at most 20,000)")
    parser.add_argument("--rounds", type=int, default=3, help="quiet and flood phases per concurrency")
    parser.add_argument("--concurrency", default="1,4", help="comma-separated numbers of carol's workers")
    parser.add_argument("--listeners", type=int, default=5, help="acme's open standalone streams")
    parser.add_argument(
        "--cooldown",
        type=int,
        default=None,
        help="UPSTREAM_FLOOD_COOLDOWN_SECONDS for Gatehouse (default: as shipped); 0 reconnects the "
        "flooding upstream at every flood, the worst case",
    )
    args = parser.parse_args()
    args.concurrency = [int(n) for n in args.concurrency.split(",") if n.strip()]

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    url = f"{public}/mcp"
    env = bench_env(
        public=public, name="flood", REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
    )
    if args.cooldown is not None:
        env["UPSTREAM_FLOOD_COOLDOWN_SECONDS"] = str(args.cooldown)
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    django_setup(env)
    acme_id = acme_prepare()
    alice = access_token_for_alice(scope=SCOPE, resource=url)
    carol = access_token_for_carol(resource=url)

    spawn = multiprocessing.get_context("spawn")
    frames, opened = spawn.Value("q", 0), spawn.Value("q", 0)
    with daphne_serving(port=port, env=env):
        listeners = spawn.Process(target=listeners_run, args=(url, alice, args.listeners, frames, opened))
        listeners.start()
        try:
            deadline = time.monotonic() + 60
            while opened.value < args.listeners:
                if time.monotonic() > deadline or not listeners.is_alive():
                    raise RuntimeError("acme's listening streams did not open")
                time.sleep(0.1)
            server = Server(acme_id=acme_id, daphne_pid=daphne_pid(), frames=frames)
            print(f"Measuring ({args.rounds} rounds of {args.count:,} notifications)...", file=sys.stderr)
            results = asyncio.run(benchmark(url=url, alice=alice, carol=carol, server=server, args=args))
            counted = asyncio.run(notifications_counted(public))
        finally:
            listeners.terminate()
            listeners.join(timeout=15)
    report(results, counted, opened.value - args.listeners, args)


if __name__ == "__main__":
    main()

"""The scenario ``make topology`` and ``tests/e2e/server/test_topology.py`` run, through nginx only, with the
official SDK client (docs/topology.md), and the figures it prints.

alice goes through the whole OAuth flow (discovery, dynamic registration, login and consent pages,
PKCE); then one 2025-11-25 session makes calls that nginx spreads round-robin over three workers:
plain ones, elicitations (the answer may reach another worker than the one waiting), progress, a
cancelled long call, a literature search whose step the jobs worker runs, and a burst past a rate
limit of ``RATE_LIMIT`` per minute. Then one worker is SIGKILLed while calls are in flight, and the
session carries on through the other two, and its standalone GET stream (the SDK opens it after the
handshake; if it was on the killed worker, the SDK reconnects through nginx with ``Last-Event-ID``)
tells it of a toolset change made after the kill. Last, ``/metrics`` and the audit trail are read
and held against what the client saw.

Every call carries a tag of its own in its arguments, which the audit trail keeps, so each answered
call's row can be found. The checks are in ``tests.e2e.topology_figures``: ``Figures.problems``
lists what did not hold.

The SDK's ``OAuthClientProvider`` sends one request at a time until that request's response
starts, so a client's concurrent calls overlap only once their responses have begun (a progress
notification, an elicitation, Gatehouse's first ping, a second in): calls meant to be in
flight together are elicitations, and the long call to cancel has a session of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from django.utils import timezone
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult, ServerNotification, TextContent

from accounts.models import Tenant
from core.errors import RateLimited
from core.models import RateLimitRule, RateLimitScope
from mcp_gateway.models import TenantToolset
from tests.e2e.harness import MemoryTokenStorage, Person, sdk_client
from tests.e2e.topology import Topology
from tests.e2e.topology_figures import (
    AFTER_KILL_CALLS,
    CALL_TIMEOUT_SECONDS,
    CANCEL_AFTER_SECONDS,
    CANCELLED,
    CANCELLED_TAG,
    CONCURRENCY,
    CONCURRENT_CALLS,
    ELICITATIONS,
    IN_FLIGHT_CALLS,
    KILL_AFTER_SECONDS,
    KILLED,
    LIMITED_TOOL,
    LIST_CHANGE_WAIT_SECONDS,
    LONG_CALL_SECONDS,
    OK,
    PROGRESS_CALLS,
    RATE_LIMIT,
    RATE_LIMIT_PERIOD_SECONDS,
    RATE_LIMITED,
    SEQUENTIAL_CALLS,
    TENANT,
    TOOL_ERROR,
    Call,
    Figures,
    figures_check,
)
from tests.e2e.topology_readings import audit_read, metrics_read, requests_per_worker


def topology_rows_prepare() -> None:
    """The conformance toolset on for acme (its test tools) and the scenario's rate limit."""
    acme = Tenant.objects.get(slug=TENANT)
    TenantToolset.objects.update_or_create(tenant=acme, toolset="conformance", defaults={"enabled": True})
    RateLimitRule.objects.update_or_create(
        scope=RateLimitScope.TOOL,
        target=LIMITED_TOOL,
        tenant=acme,
        defaults={"limit": RATE_LIMIT, "period_seconds": RATE_LIMIT_PERIOD_SECONDS},
    )


def _text(result: Any) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


class Caller:
    """The client's calls, each noted with its outcome."""

    def __init__(self, client: Client, figures: Figures) -> None:
        self.client = client
        self.figures = figures

    async def call(
        self, tool: str, arguments: dict[str, Any], *, tag: str, phase: str, **options: Any
    ) -> Call:
        call = Call(tool=tool, tag=tag, phase=phase)
        self.figures.calls.append(call)
        started = time.monotonic()
        try:
            result = await self.client.call_tool(
                tool, arguments, read_timeout_seconds=CALL_TIMEOUT_SECONDS, **options
            )
        except MCPError as error:
            call.outcome = RATE_LIMITED if error.code == RateLimited.jsonrpc_code else error.message
            call.text = error.message
        except asyncio.CancelledError:
            call.outcome = CANCELLED
            raise
        except Exception as error:
            call.outcome = type(error).__name__
            call.text = str(error)
        else:
            call.outcome = TOOL_ERROR if result.is_error else OK
            call.text = _text(result)
            call.structured = dict(result.structured_content or {})
        finally:
            call.seconds = time.monotonic() - started
        return call

    async def many(self, count: int, make: Callable[[int], Awaitable[Call]], concurrency: int) -> list[Call]:
        """``count`` calls, ``concurrency`` at a time."""
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int) -> Call:
            async with gate:
                return await make(index)

        return list(await asyncio.gather(*(one(index) for index in range(count))))


class Elicitations:
    """The person answering the tools' questions: at once, except the questions of the calls in
    flight at the kill, held back until ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        if params.message.startswith("inflight-"):
            await self.release.wait()
        # The question's own message comes back as the answer: the right answer reached the right call.
        return ElicitResult(action="accept", content={"username": params.message, "email": "alice@acme.test"})


class ListChanges:
    """When the client heard ``notifications/tools/list_changed`` (its message handler)."""

    def __init__(self) -> None:
        self.heard: list[float] = []
        self._new = asyncio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, ServerNotification) and message.method == "notifications/tools/list_changed":
            self.heard.append(time.monotonic())
            self._new.set()

    async def after(self, moment: float) -> float:
        while not any(at >= moment for at in self.heard):
            self._new.clear()
            await self._new.wait()
        return min(at for at in self.heard if at >= moment)


def _toolset_toggle() -> None:
    """A change to acme's toolsets, written here (as an operator's would be, from any process)."""
    acme = Tenant.objects.get(slug=TENANT)
    row = TenantToolset.objects.filter(tenant=acme, toolset="conformance_dynamic").first()
    TenantToolset.objects.update_or_create(
        tenant=acme, toolset="conformance_dynamic", defaults={"enabled": not (row and row.enabled)}
    )


async def scenario_run(topology: Topology, *, started: float) -> Figures:
    figures = Figures(start_seconds=topology.start_seconds)
    scenario_started = time.monotonic()
    since = timezone.now()
    elicitations = Elicitations()
    list_changes = ListChanges()
    person = Person("alice", tenant=TENANT)
    async with sdk_client(
        topology, person, elicitation_callback=elicitations, message_handler=list_changes
    ) as (client, storage):
        figures.oauth_seconds = time.monotonic() - scenario_started
        figures.protocol_version = client.protocol_version
        caller = Caller(client, figures)
        try:
            cancelling = asyncio.create_task(_cancel_long_call(topology, storage, figures))
            await _calls_spread(caller)
            await _calls_mixed(caller, figures)
            await _rate_limit_burst(caller)
            # Before the kill, which could take the long call's worker with it.
            await cancelling
            await _kill_mid_run(caller, topology, figures, elicitations)
            await _list_change_after_kill(list_changes, figures)
        except Exception:
            # Raised out of the client's block, it would be hidden behind the SDK's own teardown
            # errors for the calls still open; the report shows it instead.
            figures.problems.append(f"the scenario stopped:\n{traceback.format_exc()}")
    await metrics_read(topology, figures)
    figures.scenario_seconds = time.monotonic() - scenario_started
    await audit_read(figures, since=since)
    requests_per_worker(topology, figures)
    figures_check(figures)
    figures.wall_seconds = time.monotonic() - started
    return figures


async def _list_change_after_kill(list_changes: ListChanges, figures: Figures) -> None:
    changed_at = time.monotonic()
    await asyncio.to_thread(_toolset_toggle)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(LIST_CHANGE_WAIT_SECONDS):
            figures.list_change_seconds = await list_changes.after(changed_at) - changed_at


async def _calls_spread(caller: Caller) -> None:
    """One call after another: nginx gives each the next worker."""
    for index in range(SEQUENTIAL_CALLS):
        await caller.call(
            "slow_compute", {"seconds": 0, "label": f"seq-{index}"}, tag=f"seq-{index}", phase="seq"
        )


async def _calls_mixed(caller: Caller, figures: Figures) -> None:
    """Elicitations, progress, a job and plain calls, all at once."""

    async def elicit(index: int) -> Call:
        tag = f"elicit-{index}"
        return await caller.call("test_elicitation", {"message": tag}, tag=tag, phase="elicitation")

    async def progress(index: int) -> Call:
        seen: list[float] = []

        async def note(value: float, total: float | None, message: str | None) -> None:
            seen.append(value)

        figures.progress_seen.append(seen)
        return await caller.call(
            "test_tool_with_progress", {}, tag=f"progress-{index}", phase="progress", progress_callback=note
        )

    async def plain(index: int) -> Call:
        tag = f"mixed-{index}"
        return await caller.call("slow_compute", {"seconds": 0.1, "label": tag}, tag=tag, phase="mixed")

    async def search() -> Call:
        call = await caller.call(
            "search_papers",
            {"query": "topology-search", "max_results": 5},
            tag="topology-search",
            phase="job",
        )
        if call.outcome == OK:
            figures.search_checkpoint = call.structured.get("checkpoint", {}).get("kind", "")
        return call

    await asyncio.gather(
        caller.many(ELICITATIONS, elicit, 2),
        caller.many(PROGRESS_CALLS, progress, 2),
        caller.many(CONCURRENT_CALLS, plain, CONCURRENCY),
        search(),
    )


async def _cancel_long_call(topology: Topology, storage: MemoryTokenStorage, figures: Figures) -> None:
    """A long call the client gives up on, from a second session of alice's with the same tokens
    (its own OAuth lock, so the long call holds back none of the first session's requests): the
    SDK sends notifications/cancelled, nginx hands it to any worker, and the relay stops the call
    on the worker running it."""
    tag = CANCELLED_TAG
    async with sdk_client(topology, Person("alice", tenant=TENANT), storage=storage) as (client, _):
        caller = Caller(client, figures)
        call = caller.call(
            "slow_compute", {"seconds": LONG_CALL_SECONDS, "label": tag}, tag=tag, phase="cancel"
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(call, CANCEL_AFTER_SECONDS)


async def _rate_limit_burst(caller: Caller) -> None:
    """Three times the limit at once, then (the workers' leases given back) the limit again one by
    one: however the workers share the calls, the limit is the total."""

    async def limited(index: int) -> Call:
        tag = f"limit-{index}"
        return await caller.call(LIMITED_TOOL, {"name": tag}, tag=tag, phase="limit")

    await caller.many(3 * RATE_LIMIT, limited, 6)
    await asyncio.sleep(0.5)
    for index in range(3 * RATE_LIMIT, 4 * RATE_LIMIT):
        await limited(index)


async def _kill_mid_run(
    caller: Caller, topology: Topology, figures: Figures, elicitations: Elicitations
) -> None:
    """Calls in flight on every worker (each waiting for its elicitation's answer) and short ones
    streaming past, one worker SIGKILLed among them; then the answers, and calls after it, on the
    two workers left."""
    doomed = topology.workers[KILLED]
    figures.killed_port = doomed.port
    stop = asyncio.Event()

    async def in_flight(index: int) -> Call:
        tag = f"inflight-{index}"
        return await caller.call("test_elicitation", {"message": tag}, tag=tag, phase="kill")

    async def stream(lane: int) -> None:
        index = 0
        while not stop.is_set():
            tag = f"stream-{lane}-{index}"
            await caller.call("slow_compute", {"seconds": 0.05, "label": tag}, tag=tag, phase="kill")
            index += 1

    async def kill() -> None:
        await asyncio.sleep(KILL_AFTER_SECONDS)
        figures.in_flight_at_kill = sum(
            1 for call in figures.calls if call.phase == "kill" and not call.outcome
        )
        figures.killed_at = time.time()
        await asyncio.to_thread(doomed.kill)
        await asyncio.sleep(KILL_AFTER_SECONDS)
        elicitations.release.set()
        await asyncio.sleep(KILL_AFTER_SECONDS)
        stop.set()

    await asyncio.gather(
        asyncio.gather(*(in_flight(index) for index in range(IN_FLIGHT_CALLS))),
        *(stream(lane) for lane in range(2)),
        kill(),
    )
    for index in range(AFTER_KILL_CALLS):
        tag = f"after-{index}"
        await caller.call("slow_compute", {"seconds": 0, "label": tag}, tag=tag, phase="after kill")

"""What the topology scenario reads after its calls: ``/metrics`` through nginx and from each live
worker, the audit trail in PostgreSQL, nginx's access log and each worker's own."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
from django.db import connections
from prometheus_client.parser import text_string_to_metric_families

from core.models import AuditAction, AuditEvent
from tests.e2e.harness import DaphneServer
from tests.e2e.topology import Topology
from tests.e2e.topology_figures import AUDIT_WAIT_SECONDS, CANCELLED_TAG, TENANT, Figures


async def orm(work: Callable[[], Any]) -> Any:
    """ORM work on a thread, its connection closed after (the test database is dropped at the end)."""

    def run() -> Any:
        try:
            return work()
        finally:
            connections.close_all()

    return await asyncio.to_thread(run)


def _tool_call_counts(text: str) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gatehouse_tool_calls_total" and sample.labels.get("tenant") == TENANT:
                counts[sample.labels["outcome"]] += int(sample.value)
    return dict(counts)


async def metrics_read(topology: Topology, figures: Figures) -> None:
    """One scrape through nginx with the token, and one from each live worker directly: with one
    multiprocess directory they all sum every process, the killed one's files included."""
    authorization = {"Authorization": f"Bearer {topology.metrics_token}"}
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.get(f"{topology.base_url}/metrics")
        figures.metrics_without_token = refused.status_code
        scraped = await http.get(f"{topology.base_url}/metrics", headers=authorization)
        figures.check(scraped.status_code == 200, f"/metrics with the token: {scraped.status_code}")
        figures.metrics = _tool_call_counts(scraped.text)
        direct = []
        for worker in topology.workers:
            if topology.worker_alive(worker):
                answer = await http.get(f"{worker.base_url}/metrics", headers=authorization)
                direct.append(_tool_call_counts(answer.text))
    figures.metrics_same_on_every_worker = bool(direct) and all(
        counts == figures.metrics for counts in direct
    )


def _arguments_strings(detail: Any) -> set[str]:
    arguments = detail.get("arguments") if isinstance(detail, dict) else None
    if not isinstance(arguments, dict):
        return set()
    return {value for value in arguments.values() if isinstance(value, str)}


async def audit_read(figures: Figures, *, since: datetime) -> None:
    """The audit rows of the run, by action; every answered call's row found by its tag. The rows
    of calls in flight elsewhere are committed before their answers, so a short wait covers the
    cancelled call's row, written when its worker heard of the cancellation."""

    def read() -> list[tuple[str, str, str, Any, float | None]]:
        return list(
            AuditEvent.objects.filter(created__gte=since).values_list(
                "action", "outcome", "target", "detail", "duration_ms"
            )
        )

    deadline = time.monotonic() + AUDIT_WAIT_SECONDS
    while True:
        rows = await orm(read)
        cancelled = [
            row for row in rows if CANCELLED_TAG in _arguments_strings(row[3]) and row[3].get("cancelled")
        ]
        if cancelled or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    figures.audit = dict(Counter(action for action, *_ in rows))
    if cancelled:
        figures.cancelled_row_seconds = (cancelled[0][4] or 0) / 1000
    tags: Counter[str] = Counter()
    for action, _, _, detail, _ in rows:
        if action in (AuditAction.TOOL_CALLED, AuditAction.RATE_LIMITED):
            tags.update(_arguments_strings(detail))
    progress_rows = sum(1 for action, _, target, *_ in rows if target == "test_tool_with_progress")
    missing = [
        call.tag
        for call in figures.calls
        if call.answered and call.tool != "test_tool_with_progress" and not tags[call.tag]
    ]
    figures.check(not missing, f"answered calls without an audit row: {missing[:10]}")
    answered_progress = sum(
        1 for call in figures.calls if call.answered and call.tool == "test_tool_with_progress"
    )
    figures.check(
        progress_rows >= answered_progress,
        f"{answered_progress} progress calls answered, {progress_rows} audit rows",
    )


def requests_per_worker(topology: Topology, figures: Figures) -> None:
    """nginx's log says which worker answered each request (the last one it tried), when, and the
    request id that worker gave; each live worker's own access log holds those ids."""
    by_worker: dict[int, set[str]] = {worker.port: set() for worker in topology.workers}
    before_kill: Counter[int] = Counter({worker.port: 0 for worker in topology.workers})
    for line in topology.nginx.access_log.read_text().splitlines():
        entry = json.loads(line)
        tried = [address.strip() for address in entry["upstream"].split(",") if address.strip()]
        if not tried or tried[-1] == "-":
            continue
        figures.nginx_retried += len(tried) > 1
        port = int(tried[-1].rsplit(":", 1)[1])
        # A request the worker never answered (killed) has no id: it still counts, once.
        request_id = (
            entry["request_id"].split(",")[-1].strip().strip("-") or f"unanswered-{len(by_worker[port])}"
        )
        by_worker[port].add(request_id)
        if float(entry["at"]) < figures.killed_at:
            before_kill[port] += 1
    figures.nginx_before_kill = dict(before_kill)
    figures.nginx_requests = {port: len(ids) for port, ids in by_worker.items()}
    for worker in topology.workers:
        own = _access_log_ids(worker)
        figures.worker_log_requests[worker.port] = len(own & by_worker[worker.port])
        if worker.port != figures.killed_port:
            figures.check(
                by_worker[worker.port] <= own,
                f"worker :{worker.port}: {len(by_worker[worker.port] - own)} requests nginx passed to it "
                "are not in its own access log",
            )


def _access_log_ids(worker: DaphneServer) -> set[str]:
    ids = set()
    for line in worker.log().splitlines():
        if not line.startswith("{"):
            continue
        with_fields = json.loads(line)
        if with_fields.get("logger") == "gatehouse.access" and with_fields.get("request_id"):
            ids.add(str(with_fields["request_id"]))
    return ids

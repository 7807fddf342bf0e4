"""The health of what runs behind the tenants, as far as the admin's process can tell from the
database and its own host: job workers seen lately, work waiting, upstream MCP servers that stop
answering, and audit rows waiting in the spool.

Each figure is read where the product already records it; nothing here adds a heartbeat:

* Workers: a ``jobs_worker`` leaves its id on the task rows it claims (django-tasks' ``worker_ids``)
  and renews a heartbeat on the job step it runs (``Job.step_worker``/``step_heartbeat``). A worker
  is *seen* if it did either within ``WORKERS_WINDOW``; an idle worker leaves no trace, so an empty
  list says nothing while the queue is empty, and a great deal while tasks wait.
* Waiting: task rows ready to run (``DBTaskResult.objects.ready()``), the oldest's age, and jobs
  waiting for a person's decision or running on a step whose heartbeat has lapsed (``jobs.recovery``
  will enqueue it again).
* Upstreams: calls forwarded to an upstream carry its name in the audit row's detail
  (``audit_note(upstream=...)``); a call that failed with ``UpstreamUnavailable`` (JSON-RPC -32005)
  found it down, too slow, or not speaking MCP. An upstream is *failing* when its latest call in
  ``UPSTREAM_WINDOW`` found it so.
* Spool: the files in ``AUDIT_SPOOL_DIR`` on this host (every process of the host writes there),
  counted by ``core.audit.spool.audit_spool_backlog``, as ``gatehouse_audit_spool_backlog`` is.
  Other hosts' spools are not visible from here; their ``/metrics`` say.

A fixed number of queries, whatever the number of workers, tasks, jobs or upstreams.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Case, Count, DateTimeField, F, Max, Min, Q, Value, When
from django.db.models.fields.json import KT
from django_tasks_db.models import DBTaskResult

from core.audit.spool import SpoolBacklog, audit_spool_backlog
from core.conf import gatehouse_settings
from core.errors import UpstreamUnavailable
from core.models import AuditEvent
from jobs.models import Job, JobState
from upstreams.models import Upstream

WORKERS_WINDOW = timedelta(minutes=15)
UPSTREAM_WINDOW = timedelta(hours=1)
# The most recent task rows read to find workers: enough for every worker of a busy queue to have
# claimed one, and a bound on the read whatever the queue's size.
TASKS_SCANNED = 500
UPSTREAMS_SHOWN = 20
_RUNNING = "RUNNING"


@dataclass(frozen=True)
class WorkerSeen:
    name: str
    last_seen: datetime
    steps_running: int


@dataclass(frozen=True)
class Backlog:
    """Work waiting: for a worker (task rows) or for a person (jobs at a checkpoint)."""

    tasks_ready: int
    oldest_ready: datetime | None
    tasks_running: int
    jobs_running: int
    jobs_stalled: int
    jobs_waiting: int


@dataclass(frozen=True)
class UpstreamHealth:
    tenant_slug: str
    name: str
    calls: int
    unavailable: int
    last_unavailable: datetime | None
    last_answered: datetime | None

    @property
    def failing(self) -> bool:
        """Its latest call found it unavailable."""
        if self.last_unavailable is None:
            return False
        return self.last_answered is None or self.last_unavailable > self.last_answered


@dataclass(frozen=True)
class Health:
    checked_at: datetime
    workers: list[WorkerSeen]
    backlog: Backlog
    upstreams: list[UpstreamHealth]
    upstreams_with_calls: int
    upstreams_failing: int
    upstreams_enabled: int
    spool: SpoolBacklog

    @property
    def workers_window_minutes(self) -> int:
        return int(WORKERS_WINDOW.total_seconds() // 60)


def health_read(*, now: datetime) -> Health:
    upstreams = upstream_list_health(since=now - UPSTREAM_WINDOW)
    return Health(
        checked_at=now,
        workers=worker_list_seen(since=now - WORKERS_WINDOW),
        backlog=backlog_read(now=now),
        upstreams=upstreams[:UPSTREAMS_SHOWN],
        upstreams_with_calls=len(upstreams),
        upstreams_failing=sum(1 for upstream in upstreams if upstream.failing),
        upstreams_enabled=Upstream.objects.filter(enabled=True).count(),
        spool=audit_spool_backlog(),
    )


def worker_list_seen(*, since: datetime) -> list[WorkerSeen]:
    """Job workers that claimed a task or renewed a step's heartbeat since ``since``, latest first."""
    last_seen: dict[str, datetime] = {}
    steps: dict[str, int] = {}
    heartbeats = (
        Job.objects.filter(state=JobState.RUNNING, step_heartbeat__gte=since)
        .exclude(step_worker="")
        .values("step_worker")
        .annotate(last=Max("step_heartbeat"), steps=Count("id"))
        .order_by()
    )
    for row in heartbeats:
        last_seen[row["step_worker"]] = row["last"]
        steps[row["step_worker"]] = row["steps"]
    tasks = (
        DBTaskResult.objects.filter(Q(started_at__gte=since) | Q(finished_at__gte=since))
        .order_by("-started_at")
        .values_list("worker_ids", "started_at", "finished_at")[:TASKS_SCANNED]
    )
    for worker_ids, started, finished in tasks:
        if not isinstance(worker_ids, list) or not worker_ids:
            continue
        # The last id claimed the task most recently: the one that started (and finished) it.
        name = str(worker_ids[-1])
        seen = max(moment for moment in (started, finished) if moment is not None)
        if name not in last_seen or seen > last_seen[name]:
            last_seen[name] = seen
    return [
        WorkerSeen(name=name, last_seen=seen, steps_running=steps.get(name, 0))
        for name, seen in sorted(last_seen.items(), key=lambda item: (item[1], item[0]), reverse=True)
    ]


def backlog_read(*, now: datetime) -> Backlog:
    ready = DBTaskResult.objects.ready().aggregate(count=Count("id"), oldest=Min("enqueued_at"))
    stale = now - timedelta(seconds=gatehouse_settings.JOBS_STEP_LEASE_SECONDS)
    running = Q(state=JobState.RUNNING)
    # As jobs.recovery sees a lost step: claimed with a lapsed heartbeat, or never claimed in time.
    lapsed = (
        running
        & Q(step_token__isnull=False)
        & (Q(step_heartbeat__lt=stale) | Q(step_worker="", updated__lt=stale))
    )
    jobs = Job.objects.aggregate(
        running=Count("id", filter=running),
        stalled=Count("id", filter=lapsed),
        waiting=Count("id", filter=Q(state=JobState.WAITING)),
    )
    return Backlog(
        tasks_ready=ready["count"],
        oldest_ready=ready["oldest"],
        tasks_running=DBTaskResult.objects.filter(status=_RUNNING).count(),
        jobs_running=jobs["running"],
        jobs_stalled=jobs["stalled"],
        jobs_waiting=jobs["waiting"],
    )


def upstream_list_health(*, since: datetime) -> list[UpstreamHealth]:
    """Every upstream that was called since ``since``, failing ones first, then by unavailable calls."""
    down = Q(detail__code=UpstreamUnavailable.jsonrpc_code)
    rows = (
        AuditEvent.objects.filter(created__gte=since, detail__has_key="upstream")
        .values("tenant__slug", upstream=KT("detail__upstream"))
        .annotate(
            calls=Count("id"),
            unavailable=Count("id", filter=down),
            last_unavailable=Max("created", filter=down),
            # Max skips NULLs: the latest call that was not refused for the upstream's absence.
            last_answered=Max(
                Case(When(down, then=Value(None)), default=F("created"), output_field=DateTimeField())
            ),
        )
        .order_by()
    )
    found = [
        UpstreamHealth(
            tenant_slug=row["tenant__slug"] or "",
            name=str(row["upstream"]),
            calls=row["calls"],
            unavailable=row["unavailable"],
            last_unavailable=row["last_unavailable"],
            last_answered=row["last_answered"],
        )
        for row in rows
    ]
    return sorted(found, key=lambda u: (not u.failing, -u.unavailable, u.tenant_slug, u.name))

"""What the topology scenario (``tests.e2e.topology_scenario``) does and measures: its sizes, each
call and its outcome, the figures ``make topology`` and ``tests/e2e/server/test_topology.py`` print, and
the checks held against them (``Figures.problems``: what did not hold)."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.models import AuditAction
from mcp_gateway.transport.response_stream import FIRST_PING_SECONDS

TENANT = "acme"
# Limited for this scenario by an operator's rule (the admin's Rate limit rules), per person and
# tool, and called by nothing else; the other calls go to tools without a limit.
LIMITED_TOOL = "greet"
RATE_LIMIT = 20
RATE_LIMIT_PERIOD_SECONDS = 60
SEQUENTIAL_CALLS = 30
CONCURRENT_CALLS = 30
CONCURRENCY = 4
ELICITATIONS = 6
PROGRESS_CALLS = 6
PROGRESS_STEPS = [0.0, 50.0, 100.0]
LONG_CALL_SECONDS = 40.0
# A call that has sent nothing yet holds the SDK client's OAuth lock (OAuthClientProvider keeps it
# from sending a request until that request's response starts), so the client's cancellation can
# only go out once Gatehouse's first ping has started the response, a second in (docs/topology.md).
CANCEL_AFTER_SECONDS = FIRST_PING_SECONDS + 1.5
# Calls in flight at the kill: each waits for its elicitation's answer, which the client holds back
# until after the kill (an elicitation starts the response at once, so they are all in flight).
IN_FLIGHT_CALLS = 9
KILL_AFTER_SECONDS = 1.0
AFTER_KILL_CALLS = 30
# The SDK retries a broken GET stream after a second, twice; nginx's next try is a live worker.
LIST_CHANGE_WAIT_SECONDS = 20.0
CALL_TIMEOUT_SECONDS = 30.0
AUDIT_WAIT_SECONDS = 15.0
# The killed worker is the second: nginx's round-robin gives it every third request.
KILLED = 1

OK = "ok"
TOOL_ERROR = "tool error"
RATE_LIMITED = "rate limited"
CANCELLED = "cancelled by the client"
CANCELLED_TAG = "cancelled-long-call"


@dataclass
class Call:
    tool: str
    tag: str
    phase: str
    outcome: str = ""
    text: str = ""
    structured: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def answered(self) -> bool:
        """The client got the server's answer: a result or the server's own refusal."""
        return self.outcome in (OK, TOOL_ERROR, RATE_LIMITED)


@dataclass
class Figures:
    """What the run measured; ``problems`` is every check that did not hold."""

    protocol_version: str = ""
    oauth_seconds: float = 0.0
    calls: list[Call] = field(default_factory=list)
    progress_seen: list[list[float]] = field(default_factory=list)
    killed_port: int = 0
    # When the worker was killed (Unix time, as nginx logs it).
    killed_at: float = 0.0
    in_flight_at_kill: int = 0
    # Requests nginx passed to each worker (by port) before the kill, and in all.
    nginx_before_kill: dict[int, int] = field(default_factory=dict)
    nginx_requests: dict[int, int] = field(default_factory=dict)
    nginx_retried: int = 0
    # Of those, the ones found by their request id in the worker's own access log.
    worker_log_requests: dict[int, int] = field(default_factory=dict)
    metrics: dict[str, int] = field(default_factory=dict)
    metrics_same_on_every_worker: bool = False
    metrics_without_token: int = 0
    audit: dict[str, int] = field(default_factory=dict)
    cancelled_row_seconds: float | None = None
    search_checkpoint: str = ""
    # How long after a toolset change (made after the kill) the session's GET stream told the client.
    list_change_seconds: float | None = None
    start_seconds: float = 0.0
    scenario_seconds: float = 0.0
    wall_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def check(self, holds: bool, problem: str) -> None:
        if not holds:
            self.problems.append(problem)

    def outcomes(self, phase: str | None = None) -> Counter[str]:
        return Counter(call.outcome for call in self.calls if phase is None or call.phase == phase)

    @property
    def answered(self) -> int:
        return sum(1 for call in self.calls if call.answered)

    @property
    def failed_by_kill(self) -> int:
        """Calls of the kill's phase that got no answer: in flight on the killed worker."""
        return sum(1 for call in self.calls if call.phase == "kill" and call.outcome != OK)

    @property
    def audited_calls(self) -> int:
        return self.audit.get(AuditAction.TOOL_CALLED, 0) + self.audit.get(AuditAction.RATE_LIMITED, 0)

    def as_dict(self) -> dict[str, Any]:
        limit = self.outcomes("limit")
        return {
            "protocol_version": self.protocol_version,
            "oauth_seconds": round(self.oauth_seconds, 2),
            "calls_made": len(self.calls),
            "calls_answered": self.answered,
            "outcomes": dict(self.outcomes()),
            "failed_because_of_the_kill": self.failed_by_kill,
            "in_flight_at_kill": self.in_flight_at_kill,
            "killed_worker_port": self.killed_port,
            "requests_per_worker_before_kill": _by_port(self.nginx_before_kill),
            "requests_per_worker_nginx": _by_port(self.nginx_requests),
            "requests_per_worker_own_log": _by_port(self.worker_log_requests),
            "nginx_retried_on_another_worker": self.nginx_retried,
            "rate_limit": {
                "limit": RATE_LIMIT,
                "period_seconds": RATE_LIMIT_PERIOD_SECONDS,
                "allowed": limit[OK],
                "refused": limit[RATE_LIMITED],
            },
            "metrics_tool_calls": self.metrics,
            "audit_rows": self.audit,
            "cancelled_call_stopped_after_seconds": self.cancelled_row_seconds,
            "list_change_seconds": self.list_change_seconds,
            "start_seconds": round(self.start_seconds, 1),
            "scenario_seconds": round(self.scenario_seconds, 1),
            "wall_seconds": round(self.wall_seconds, 1),
            "problems": self.problems,
        }

    def report(self) -> str:
        outcomes = self.outcomes()
        limit = self.outcomes("limit")
        before = " / ".join(str(count) for count in self.nginx_before_kill.values())
        workers = ", ".join(
            f":{port} {count} ({self.worker_log_requests.get(port, 0)} in its own log"
            + (", killed)" if port == self.killed_port else ")")
            for port, count in self.nginx_requests.items()
        )
        errors = ", ".join(f"{kind} {count}" for kind, count in outcomes.items() if kind != OK) or "none"
        metrics = " + ".join(f"{outcome} {count}" for outcome, count in sorted(self.metrics.items()))
        other_rows = ", ".join(
            f"{action} {count}"
            for action, count in sorted(self.audit.items())
            if action not in (AuditAction.TOOL_CALLED, AuditAction.RATE_LIMITED)
        )
        lines = [
            "nginx round-robin over 3 Daphne workers, the jobs worker, one PostgreSQL database, Redis",
            f"OAuth (discovery, registration, login, consent, PKCE) and initialize through nginx: "
            f"{self.oauth_seconds:.1f} s; protocol {self.protocol_version}",
            f"tool calls made: {len(self.calls)}; answered {self.answered} (ok {outcomes[OK]}, "
            f"rate-limited {outcomes[RATE_LIMITED]}, tool errors {outcomes[TOOL_ERROR]})",
            f"errors by kind: {errors}",
            f"failed because of the kill: {self.failed_by_kill} of {self.in_flight_at_kill} calls in "
            f"flight when worker :{self.killed_port} was SIGKILLed; after it "
            f"{self.outcomes('after kill')[OK]} of {AFTER_KILL_CALLS} calls ok, same session",
            f"requests per worker before the kill: {before}; in all (nginx's log): {workers}; "
            f"{self.nginx_retried} retried by nginx on another worker",
            f"elicitations answered {self.outcomes('elicitation')[OK]}/{ELICITATIONS}; progress "
            f"{sum(len(seen) for seen in self.progress_seen)} notifications over {PROGRESS_CALLS} calls; "
            f"cancelled call stopped by its worker after {self.cancelled_row_seconds or 0:.1f} s; "
            f"literature search (a job step in the jobs worker): {self.search_checkpoint or '-'}",
            "standalone GET stream: tools/list_changed heard "
            + (
                f"{self.list_change_seconds:.2f} s after a toolset change made after the kill"
                if self.list_change_seconds is not None
                else "NOT heard after a toolset change made after the kill"
            ),
            f"rate limit {LIMITED_TOOL} {RATE_LIMIT}/{RATE_LIMIT_PERIOD_SECONDS} s ({TENANT}, per person): "
            f"allowed {limit[OK]} of {sum(limit.values())} calls across 3 workers (counted per process: "
            f"up to {3 * RATE_LIMIT}), refused {limit[RATE_LIMITED]}",
            f"/metrics (token only; one scrape sums every worker's files, the killed one's too; each live "
            f"worker's the same: {'yes' if self.metrics_same_on_every_worker else 'NO'}): "
            f"tool calls {sum(self.metrics.values())} = {metrics}",
            f"audit rows: {AuditAction.TOOL_CALLED} {self.audit.get(AuditAction.TOOL_CALLED, 0)} + "
            f"{AuditAction.RATE_LIMITED} {self.audit.get(AuditAction.RATE_LIMITED, 0)} = "
            f"{self.audited_calls} for {self.answered} calls answered (each found by its tag) and "
            f"{len(self.calls) - self.answered} not; {other_rows}",
            f"wall time: {self.wall_seconds:.1f} s (the processes started in {self.start_seconds:.1f} s, "
            f"the scenario ran {self.scenario_seconds:.1f} s)",
        ]
        if self.problems:
            lines.append("PROBLEMS:")
            lines.extend(f"  - {problem}" for problem in self.problems)
        else:
            lines.append("All checks held.")
        return "\n".join(lines)


def _by_port(counts: dict[int, int]) -> dict[str, int]:
    return {str(port): count for port, count in counts.items()}


def figures_save(figures: Figures) -> None:
    """The report and the figures as JSON into ``$GATEHOUSE_ARTIFACTS_DIR``, when it is set (CI)."""
    artifacts = os.environ.get("GATEHOUSE_ARTIFACTS_DIR")
    if not artifacts:
        return
    where = Path(artifacts)
    where.mkdir(parents=True, exist_ok=True)
    (where / "topology.txt").write_text(figures.report() + "\n")
    (where / "topology.json").write_text(json.dumps(figures.as_dict(), indent=2) + "\n")


def figures_check(figures: Figures) -> None:
    """Hold the figures against what the scenario did: each check that fails is a problem."""
    check = figures.check
    check(figures.protocol_version == "2025-11-25", f"negotiated {figures.protocol_version}")
    for phase in ("seq", "elicitation", "progress", "mixed", "job", "after kill"):
        outcomes = figures.outcomes(phase)
        check(set(outcomes) == {OK}, f"{phase} calls: {dict(outcomes)}")
    # Each answer held the question's own message: it reached the call that asked, wherever it ran.
    crossed = [
        call.tag
        for call in figures.calls
        if call.tool == "test_elicitation" and call.outcome == OK and call.tag not in call.text
    ]
    check(not crossed, f"elicitations answered with another's answer: {crossed}")
    check(
        all(seen == PROGRESS_STEPS for seen in figures.progress_seen),
        f"progress seen: {figures.progress_seen}",
    )
    check(
        figures.search_checkpoint == "plan",
        f"the literature search's checkpoint: {figures.search_checkpoint!r}",
    )
    check(
        figures.outcomes("cancel") == Counter({CANCELLED: 1}), f"cancel: {dict(figures.outcomes('cancel'))}"
    )
    stopped = figures.cancelled_row_seconds
    check(
        stopped is not None and stopped < CANCEL_AFTER_SECONDS + 5,
        f"the cancelled call's audit row (cancelled, and stopped soon after): {stopped}",
    )
    check(
        figures.list_change_seconds is not None,
        "the session's standalone GET stream did not hear a toolset change made after the kill",
    )
    limit = figures.outcomes("limit")
    check(
        limit == Counter({OK: RATE_LIMIT, RATE_LIMITED: 3 * RATE_LIMIT}),
        f"rate limit {RATE_LIMIT}: {dict(limit)}",
    )
    check(
        0 < figures.failed_by_kill <= figures.in_flight_at_kill,
        f"{figures.failed_by_kill} calls failed with the kill, {figures.in_flight_at_kill} were in flight",
    )
    # Round-robin: before the kill, each worker had its third, give or take the odd request.
    before = list(figures.nginx_before_kill.values())
    check(
        len(before) == 3 and min(before) >= 0.9 * max(before),
        f"requests per worker before the kill: {figures.nginx_before_kill}",
    )
    check(
        figures.metrics_without_token == 403, f"/metrics without the token: {figures.metrics_without_token}"
    )
    check(figures.metrics_same_on_every_worker, "the live workers' /metrics disagree")
    counted = sum(figures.metrics.values())
    # The workers saw every answered call, the cancelled one, and perhaps some of the killed worker's
    # whose answers it could not send any more.
    check(
        figures.answered <= counted <= figures.answered + 1 + figures.failed_by_kill,
        f"/metrics counts {counted} tool calls for {figures.answered} answered",
    )
    check(
        counted == figures.audited_calls,
        f"/metrics counts {counted} tool calls, the audit trail {figures.audited_calls}",
    )
    refused = figures.outcomes()[RATE_LIMITED]
    check(
        figures.metrics.get("rate_limited", 0) == refused,
        f"/metrics rate_limited {figures.metrics.get('rate_limited')} for {refused} refusals",
    )
    # One sign-in and one registration for the whole run; two sessions (the second for the cancelled
    # call), so the kill cost the first one nothing.
    expected = {
        AuditAction.CLIENT_REGISTERED: 1,
        AuditAction.LOGIN_SUCCEEDED: 1,
        AuditAction.CONSENT_GRANTED: 1,
        AuditAction.SESSION_CREATED: 2,
    }
    for action, count in expected.items():
        check(figures.audit.get(action) == count, f"audit {action}: {figures.audit.get(action)}")

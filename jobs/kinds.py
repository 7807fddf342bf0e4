"""What a kind of job does: its steps, its checkpoints and what each decision means.

The engine (``jobs.steps``, ``jobs.services``) knows nothing of literature searches; a kind does.
A toolset app registers its kinds in its ``AppConfig.ready`` (``job_kind_register``), so a worker,
which loads every installed app, can run any of them. A kind is plain synchronous code: it runs in a
worker process, never in the event loop of the MCP endpoint.

A step returns what happens next (``NextStep``, ``Checkpoint``, ``Complete``); a decision returns
the same, or ``Stop``. A step that cannot go on raises ``JobFailed`` with a message for the person;
anything else it raises fails the job with a generic message (logged in full).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class JobView:
    """What a kind sees of its job: read-only; it answers with an outcome."""

    id: str
    tenant_id: int
    user_id: int
    kind: str
    input: Mapping[str, Any]
    context: Mapping[str, Any]
    iteration: int
    checkpoint_kind: str
    checkpoint: Mapping[str, Any] | None


@dataclass(frozen=True)
class NextStep:
    """Go on with ``step`` in a new task (the worker may change in between)."""

    step: str
    context: dict[str, Any]
    message: str = ""


@dataclass(frozen=True)
class Checkpoint:
    """Stop and wait for a decision on ``payload`` (its shape is the checkpoint kind's)."""

    kind: str
    payload: dict[str, Any]
    context: dict[str, Any]
    message: str = ""


@dataclass(frozen=True)
class Complete:
    result: dict[str, Any]
    context: dict[str, Any] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class Stop:
    """The person ended the job at a checkpoint (a rejected plan): it is cancelled."""

    reason: str


StepOutcome = NextStep | Checkpoint | Complete
DecisionOutcome = NextStep | Checkpoint | Complete | Stop
# Reports a step's progress: a short message; the engine counts and stores it.
ProgressReport = Callable[[str], None]


class JobFailed(Exception):
    """A step cannot go on; ``message`` is for the person (it is stored as the job's error)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


DEFAULT_QUEUE = "default"


class JobKind(Protocol):
    """A kind may also set ``queue``: the task queue its steps go to (``DEFAULT_QUEUE`` when it
    does not), so a deployment can give it workers of its own (``jobs_worker --queue-name``)."""

    name: str
    # The checkpoint kinds this kind stops at, and the actions each accepts.
    checkpoint_kinds: tuple[str, ...]

    def first_step(self, *, job_input: Mapping[str, Any]) -> NextStep:
        """The first step of a new job, after its input was validated (``validate_input``)."""
        ...

    def validate_input(self, *, job_input: Mapping[str, Any]) -> dict[str, Any]:
        """The input as stored; raises ``core.errors.InvalidInput`` with a clear message."""
        ...

    def run_step(self, *, job: JobView, step: str, report: ProgressReport) -> StepOutcome: ...

    def decide(self, *, job: JobView, action: str, data: Mapping[str, Any] | None) -> DecisionOutcome:
        """What ``action`` with ``data`` at the job's pending checkpoint leads to; raises
        ``core.errors.InvalidInput`` when ``data`` does not fit the checkpoint kind."""
        ...


_kinds: dict[str, JobKind] = {}


def job_kind_register(kind: JobKind) -> None:
    existing = _kinds.get(kind.name)
    if existing is not None and existing is not kind:
        raise ImproperlyConfigured(f"Two job kinds are named {kind.name!r}.")
    _kinds[kind.name] = kind


def job_kind_known(name: str) -> bool:
    """Whether this process can run ``name``'s steps (its app is installed here)."""
    return name in _kinds


def job_kind_queue(kind: JobKind) -> str:
    return str(getattr(kind, "queue", DEFAULT_QUEUE))


def job_kind_get(name: str) -> JobKind:
    try:
        return _kinds[name]
    except KeyError:
        raise ImproperlyConfigured(f"No job kind {name!r} is registered (is its app installed?).") from None

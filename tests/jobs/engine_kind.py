"""A job kind for the engine's own tests: one step ("work") then a "review" checkpoint, again and
again. Its input steers it: ``sleep`` seconds in the step, ``log`` a file that gets one line per
execution of a step (appended, so several worker processes can count executions), ``fail`` makes
the step raise (``job_failed``, ``boom``, ``database``). ``during_step`` lets an in-process test
act while a step runs (cancel the job, say)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from django.db import OperationalError

from jobs.kinds import (
    Checkpoint,
    Complete,
    DecisionOutcome,
    JobFailed,
    JobView,
    NextStep,
    ProgressReport,
    StepOutcome,
    Stop,
    job_kind_register,
)

ENGINE_TEST_KIND = "engine_test"
BOOM_DETAIL = "secret internal detail 42"

during_step: list[Callable[[JobView], None]] = []


ENGINE_TEST_QUEUE = "engine-tests"


class EngineTestKind:
    name = ENGINE_TEST_KIND
    # Its own queue: the suite's main jobs worker (which has no such kind) never sees its steps.
    queue = ENGINE_TEST_QUEUE
    checkpoint_kinds: tuple[str, ...] = ("review",)

    def validate_input(self, *, job_input: Mapping[str, Any]) -> dict[str, Any]:
        return dict(job_input)

    def first_step(self, *, job_input: Mapping[str, Any]) -> NextStep:
        return NextStep(step="work", context={"rounds": 0}, message="Queued.")

    def run_step(self, *, job: JobView, step: str, report: ProgressReport) -> StepOutcome:
        log = job.input.get("log")
        if log:
            line = f"{job.id} {step} {job.iteration} {os.getpid()}\n".encode()
            descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(descriptor, line)
            finally:
                os.close(descriptor)
        report("working")
        for hook in list(during_step):
            hook(job)
        time.sleep(float(job.input.get("sleep", 0)))
        fail = job.input.get("fail")
        if fail == "job_failed":
            raise JobFailed("The input cannot be worked on.")
        if fail == "boom":
            raise RuntimeError(BOOM_DETAIL)
        if fail == "database":
            raise OperationalError("server closed the connection unexpectedly")
        rounds = int(job.context.get("rounds", 0)) + 1
        return Checkpoint(
            kind="review",
            payload={"iteration": job.iteration, "rounds": rounds},
            context={"rounds": rounds},
            message="Ready for review.",
        )

    def decide(self, *, job: JobView, action: str, data: Mapping[str, Any] | None) -> DecisionOutcome:
        if action == "reject":
            return Stop(reason="Rejected.")
        if action == "edit":
            return NextStep(step="work", context=dict(job.context), message="Working again.")
        return Complete(result={"rounds": job.context.get("rounds")}, message="Done.")


ENGINE_TEST = EngineTestKind()


def engine_kind_register() -> None:
    job_kind_register(ENGINE_TEST)

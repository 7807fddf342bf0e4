"""The job kind behind MCP tool tasks (``mcp_gateway.kernel.tool_tasks_2026_07_28``): one step, ``call``,
that calls the task's tool for the person, tenant, OAuth client and scopes captured when the task started.

Each step is one ``tools/call`` through the pipeline (``mcp_gateway.pipeline.tool_runs``): its answer
completes the job, or, when the tool needs the person's input (``InputRequiredResult``), stops it at an
``input_required`` checkpoint whose decision carries the input responses; the next step calls the tool again
with them and the ``requestState`` the tool sealed, which never leaves the server. A protocol-level error
(the tool crashed, timed out, was refused) completes the job with that error (the task is then ``failed``),
so the JSON-RPC error object survives as it was.

What comes from the client (arguments, input responses) and what the tool answers is kept as JSON
text inside the row's JSON: PostgreSQL's ``jsonb`` refuses a NUL character in a string, which a
client may send and a tool may echo; as escaped text it is stored and given back unchanged.

A cancel stops a running call at once: while the tool runs, the step watches its job's row, and a
job that is no longer running (cancelled) cancels the call, whose outcome the engine drops anyway.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from core.conf import gatehouse_settings
from core.db import db_call
from core.errors import AuthenticationFailed, PermissionDenied
from core.identity import Identity
from jobs.kinds import (
    Checkpoint,
    Complete,
    DecisionOutcome,
    JobView,
    NextStep,
    ProgressReport,
    StepOutcome,
    job_kind_register,
)
from jobs.models import Job, JobState

TOOL_TASK_KIND = "mcp.tool_call"
CALL_STEP = "call"
INPUT_CHECKPOINT = "input_required"
# A tool that asks for input again and again (a client answering in a loop) ends here.
INPUT_ROUNDS_MAX = 50
# How often a running call looks at its job's row for a cancel.
CANCEL_POLL_SECONDS = 0.5
# Progress messages are written to the row at most this often.
PROGRESS_WRITE_SECONDS = 0.5
RESULT_MAX_BYTES = 4 * 1024 * 1024

INTERNAL_ERROR = -32603
TOO_MANY_ROUNDS = "The tool asked for input more than {rounds} times; the task stops here."
RESULT_TOO_LARGE = "The tool's result is larger than {limit} bytes and was not kept."
ACCESS_GONE = "The task's person no longer has access to the tenant."


def wire_dump(value: Any) -> str:
    """``value`` as JSON text (raises ``ValueError`` for a value nested too deeply to encode)."""
    try:
        return json.dumps(value, separators=(",", ":"))
    except RecursionError:
        raise ValueError("nested too deeply") from None


def wire_load(text: object) -> Any:
    return json.loads(text) if isinstance(text, str) else None


def identity_dump(identity: Identity) -> dict[str, Any]:
    return {
        "user_id": identity.user_id,
        "username": identity.username,
        "tenant_id": identity.tenant_id,
        "tenant_slug": identity.tenant_slug,
        "tenant_name": identity.tenant_name,
        "role": identity.role,
        "scopes": sorted(identity.scopes),
        "application_id": identity.application_id,
        "client_id": identity.client_id,
        "client_name": identity.client_name,
        "token_id": identity.token_id,
    }


def identity_now(*, captured: Mapping[str, Any]) -> Identity:
    """The captured caller as they stand now: a disabled account, a removed membership or a
    deactivated tenant stops the task's next call, and a lowered role narrows its scopes, as it
    would stop or narrow the person's next request."""
    from accounts.models import Membership
    from accounts.scopes import scopes_for_role

    membership = (
        Membership.objects.select_related("user", "tenant")
        .filter(user_id=captured["user_id"], tenant_id=captured["tenant_id"])
        .first()
    )
    if membership is None:
        raise PermissionDenied(ACCESS_GONE)
    if not membership.user.is_active or not membership.tenant.is_active:
        raise AuthenticationFailed(ACCESS_GONE)
    scopes = frozenset(captured["scopes"]) & scopes_for_role(role=membership.role)
    return Identity(
        user_id=membership.user_id,
        username=membership.user.username,
        tenant_id=membership.tenant_id,
        tenant_slug=membership.tenant.slug,
        tenant_name=membership.tenant.name,
        role=membership.role,
        scopes=scopes,
        application_id=int(captured["application_id"]),
        client_id=str(captured["client_id"]),
        client_name=str(captured["client_name"]),
        token_id=int(captured["token_id"]),
    )


def _failed(error: Mapping[str, Any]) -> Complete:
    message = str(error.get("message", ""))
    return Complete(result={"error": wire_dump(dict(error))}, message=f"Failed: {message}"[:200])


class ToolTaskKind:
    name = TOOL_TASK_KIND
    checkpoint_kinds: tuple[str, ...] = (INPUT_CHECKPOINT,)

    @property
    def queue(self) -> str:
        """``JOBS_TOOL_TASK_QUEUE`` (``default`` unless set), read when a step is enqueued."""
        return gatehouse_settings.JOBS_TOOL_TASK_QUEUE

    def validate_input(self, *, job_input: Mapping[str, Any]) -> dict[str, Any]:
        # Built by the runner (``jobs.tool_tasks``), which checked the client's parts.
        return dict(job_input)

    def first_step(self, *, job_input: Mapping[str, Any]) -> NextStep:
        return NextStep(step=CALL_STEP, context={"rounds": 0}, message="Working.")

    def run_step(self, *, job: JobView, step: str, report: ProgressReport) -> StepOutcome:
        from jobs.step_loop import step_loop_run

        return step_loop_run(self._call(job=job, report=report))

    async def _call(self, *, job: JobView, report: ProgressReport) -> StepOutcome:
        from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
        from mcp_gateway.pipeline.tool_runs import tool_call_run

        try:
            identity = await db_call(identity_now, captured=job.input["identity"])
        except (AuthenticationFailed, PermissionDenied) as refused:
            return _failed(as_mcp_error(refused).error.model_dump(mode="json", exclude_none=True))
        written = 0.0

        async def on_progress(message: str) -> None:
            nonlocal written
            if time.monotonic() - written >= PROGRESS_WRITE_SECONDS:
                written = time.monotonic()
                await db_call(report, message)

        call = asyncio.ensure_future(
            tool_call_run(
                identity=identity,
                task_id=job.id,
                tool=str(job.input["tool"]),
                arguments=wire_load(job.input["arguments"]) or {},
                client_capabilities=wire_load(job.input["client_capabilities"]) or {},
                input_responses=wire_load(job.context.get("input_responses")),
                request_state=job.context.get("request_state"),
                on_progress=on_progress,
            )
        )
        watch = asyncio.ensure_future(_until_stopped(job_id=job.id))
        await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
        if not call.done():
            # Cancelled (or gone): stop the tool now; the engine drops this step's outcome.
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            return _failed({"code": INTERNAL_ERROR, "message": "Cancelled."})
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        answer = call.result()
        if answer.error is not None:
            return _failed(answer.error)
        result = answer.result or {}
        if result.get("resultType") == "input_required":
            rounds = int(job.context.get("rounds", 0)) + 1
            if rounds > INPUT_ROUNDS_MAX:
                return _failed(
                    {"code": INTERNAL_ERROR, "message": TOO_MANY_ROUNDS.format(rounds=INPUT_ROUNDS_MAX)}
                )
            return Checkpoint(
                kind=INPUT_CHECKPOINT,
                payload={"inputRequests": wire_dump(result.get("inputRequests") or {})},
                context={"rounds": rounds, "request_state": result.get("requestState")},
                message="Waiting for input.",
            )
        text = wire_dump(result)
        if len(text) > RESULT_MAX_BYTES:
            return _failed(
                {"code": INTERNAL_ERROR, "message": RESULT_TOO_LARGE.format(limit=RESULT_MAX_BYTES)}
            )
        return Complete(result={"result": text}, message="Completed.")

    def decide(self, *, job: JobView, action: str, data: Mapping[str, Any] | None) -> DecisionOutcome:
        # The runner's ``update`` is the one caller: approve with the input responses (JSON text).
        responses = (data or {}).get("inputResponses")
        return NextStep(
            step=CALL_STEP,
            context={**job.context, "input_responses": responses},
            message="Working.",
        )


async def _until_stopped(*, job_id: str) -> None:
    """Returns once the job is no longer running (cancelled, or deleted)."""
    # The cancel is written by another process (the endpoint's): the row is the only thing to watch.
    while await db_call(_running, job_id=job_id):  # noqa: ASYNC110
        await asyncio.sleep(CANCEL_POLL_SECONDS)


def _running(*, job_id: str) -> bool:
    return Job.objects.filter(pk=job_id, state=JobState.RUNNING).exists()


TOOL_TASK = ToolTaskKind()


def tool_task_kind_register() -> None:
    job_kind_register(TOOL_TASK)

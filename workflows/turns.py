"""One turn of a workflow tool, start to finish: who is calling, where their session stands, the
cross-worker turn lock, the time limit, and the turn written whole at the end.

The session's standing (current context, active conversation) lives in ``conversations``'
``SessionBinding``, keyed by the handshake era's MCP session id, or on 2026-07-28, which has no
session, by (person, tenant, OAuth client): so the tools behave the same in both eras.

A turn is written in one transaction after its body returned, with the context it moved to. A body
that raised (a malformed command, a refused scope) or ran out of time leaves no row: the
conversation never holds half a turn. The lock is a row update any worker sees, so a second turn
in the same session is refused (-32009, ``retryAfterSeconds``) wherever it arrives.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from mcp.server.mcpserver import Context

from conversations.models import TurnKind
from conversations.selectors import binding_get, binding_key
from conversations.services import binding_set_context, turn_record
from conversations.turn_lock import turn_lock_release, turn_lock_take
from core.db import db_call
from core.errors import NotFound, Timeout
from core.identity import Identity
from mcp_gateway.kernel.identity import identity_from_context, session_id_from_context
from mcp_gateway.pipeline.audit_trail import audit_note
from workflows.catalogue import WorkflowView, workflow_view
from workflows.outputs import CommandOutput, TraceEvent

NOT_INITIALIZED = (
    "This session has not called initialize yet: call the initialize tool first (it binds the session "
    "to you and your conversation), then retry."
)
TURN_TIMED_OUT = (
    "The turn took longer than its {seconds:g} s limit and was stopped; nothing of it was kept in the "
    "conversation. Retry with a larger timeout_seconds (at most {limit} s) or a narrower request."
)
TURN_TIMEOUT_MAX_SECONDS = 300
# The lock outlives the turn's own limit by this much, so it is released by the turn, not by time.
LOCK_MARGIN_SECONDS = 10
# Rows of a response a turn keeps (the conversations page shows the first 50).
ROWS_KEPT = 200


@dataclass(frozen=True)
class Caller:
    identity: Identity
    key: str
    session_id: str | None


@dataclass(frozen=True)
class Bound:
    """A caller whose session called ``initialize``: its context and active conversation."""

    caller: Caller
    context: str
    conversation_id: uuid.UUID
    workflow: WorkflowView


@dataclass
class TurnState:
    """What a turn's body changes: the context it ends in and the traces it made."""

    bound: Bound
    context: str
    traces: list[TraceEvent] = field(default_factory=list)


def caller_of(ctx: Context) -> Caller:
    identity = identity_from_context(ctx)
    session_id = session_id_from_context(ctx)
    key = binding_key(
        session_id=session_id,
        user_id=identity.user_id,
        tenant_id=identity.tenant_id,
        client_id=identity.client_id,
    )
    return Caller(identity=identity, key=key, session_id=session_id)


def _bound(*, caller: Caller) -> Bound:
    binding = binding_get(
        key=caller.key, user_id=caller.identity.user_id, tenant_id=caller.identity.tenant_id
    )
    if binding is None or binding.conversation_id is None:
        raise NotFound(NOT_INITIALIZED, data={"reason": "not_initialized"})
    workflow = workflow_view(tenant_id=caller.identity.tenant_id)
    context = binding.context
    if workflow.context(context) is None:
        # The workflow was re-imported without the session's context: start again at its first.
        context = workflow.contexts[0].name if workflow.contexts else ""
    return Bound(caller=caller, context=context, conversation_id=binding.conversation_id, workflow=workflow)


async def bound_caller(ctx: Context) -> Bound:
    """The caller, where their session stands and the tenant's workflow; NotFound (-32002) before
    ``initialize`` or when the tenant has no workflow."""
    return await db_call(_bound, caller=caller_of(ctx))


def _stored_output(output: CommandOutput) -> dict[str, Any]:
    """The output as the conversation keeps it: without traces (kept apart), and with at most
    ``ROWS_KEPT`` rows per response. The client received every row; the conversation is a record."""
    stored = output.model_dump(mode="json", exclude={"traces"})
    for response in stored["command_responses"]:
        artifacts = response.get("artifacts") or {}
        rows = artifacts.get("rows")
        if isinstance(rows, list) and len(rows) > ROWS_KEPT:
            artifacts["rows"] = rows[:ROWS_KEPT]
            artifacts["rowsKept"] = ROWS_KEPT
    return stored


def _turn_save(
    *, state: TurnState, kind: str, request: str, output: CommandOutput, duration_ms: float
) -> int:
    with transaction.atomic():
        if state.context != state.bound.context:
            binding_set_context(key=state.bound.caller.key, context=state.context)
        turn = turn_record(
            conversation_id=state.bound.conversation_id,
            kind=kind,
            request=request,
            output=_stored_output(output),
            traces=[event.model_dump(mode="json") for event in state.traces],
            success=output.success,
            duration_ms=duration_ms,
        )
    return turn.pk


async def turn_run(
    *,
    ctx: Context,
    kind: TurnKind,
    request: str,
    timeout_seconds: float,
    body: Callable[[TurnState], Awaitable[CommandOutput]],
) -> CommandOutput:
    """Run ``body`` as one turn of the caller's active conversation, under the session's lock and
    within ``timeout_seconds``; record it whole, or not at all."""
    bound = await bound_caller(ctx)
    key = bound.caller.key
    await db_call(turn_lock_take, key=key, seconds=timeout_seconds + LOCK_MARGIN_SECONDS)
    try:
        state = TurnState(bound=bound, context=bound.context)
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout_seconds):
                output = await body(state)
        except TimeoutError:
            raise Timeout(
                TURN_TIMED_OUT.format(seconds=timeout_seconds, limit=TURN_TIMEOUT_MAX_SECONDS),
                data={"reason": "turn_timeout", "timeoutSeconds": timeout_seconds},
            ) from None
        duration_ms = round((time.monotonic() - started) * 1000, 1)
        turn_id = await db_call(
            _turn_save, state=state, kind=kind.value, request=request, output=output, duration_ms=duration_ms
        )
        audit_note(
            conversation=str(bound.conversation_id),
            turn=turn_id,
            command=output.command_name,
            success=output.success,
        )
        return output
    finally:
        # Shielded: a cancelled turn (the client gave up) must still free the session.
        await asyncio.shield(db_call(turn_lock_release, key=key))


def trace_pair(
    *, raw_command: str, command_name: str, parameters: dict[str, Any], response_text: str, success: bool
) -> list[TraceEvent]:
    """The two trace events of one command a client (not the agent) asked for."""
    now = int(time.time() * 1000)
    return [
        TraceEvent(
            timestamp=now,
            direction="agent_to_workflow",
            raw_command=raw_command,
            command_name=command_name,
            parameters=parameters,
        ),
        TraceEvent(
            timestamp=int(time.time() * 1000),
            direction="workflow_to_agent",
            raw_command=raw_command,
            command_name=command_name,
            parameters=parameters,
            response_text=response_text,
            success=success,
        ),
    ]

"""The audit trail of MCP calls: an SDK server middleware in front of the request guard.

It sees every ``tools/call`` and ``resources/read`` after the SDK parsed it and before the guard
checks it, so refusals by the guard (unknown tool, missing scope, rate limit) are recorded as well
as what the tool did. Each request leaves exactly one event:

* ``permission.denied`` when a scope was missing (-32001) and ``rate.limited`` when a limit refused
  it (-32029), both with outcome ``denied``; rate-limit refusals of one person and tool are
  counted into one row per minute after the first (``core.audit.refusals``);
* otherwise ``tool.called`` / ``resource.read``, outcome ``ok``, or ``error`` with the JSON-RPC code
  (or the tool's own ``isError`` result), and the time it took.

Any other method (a subscription, a prompt) leaves a row only when the guard refuses it a scope
(``permission.denied``).

A call that something else made on the caller's behalf (a workflow command's tool, through
``pipeline.tool_runs``) says so in ``detail.via``.

A tool adds what it did beyond its arguments (the SQL that ran, the tokens a model spent) with
``audit_note``; it lands under the event's ``detail.result``.

The call's response waits for the row to be committed (``audit.audit_record_async``); for a
read-only call that succeeded (a tool declared ``read_only``, a resource read), committed but not
yet flushed to disk by PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from core.audit.refusals import audit_refusal_record_async
from core.audit.trail import audit_arguments, audit_entry, audit_record_async
from core.errors import PermissionDenied, RateLimited
from core.models import AuditAction, AuditOutcome, RateLimitScope
from mcp_gateway.kernel.identity import identity_from_request
from mcp_gateway.kernel.registry import Registry
from mcp_gateway.kernel.scope_keys import SESSION_KEY, VIA_KEY

# The notes of the call in progress; a dict shared by reference, so a handler running in a task
# of its own (a copy of this context) still writes into the same one.
_notes: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "gatehouse_audit_notes", default=None
)
NOTE_MAX_CHARS = 4000

AUDITED_METHODS = {
    "tools/call": (AuditAction.TOOL_CALLED, RateLimitScope.TOOL),
    "resources/read": (AuditAction.RESOURCE_READ, RateLimitScope.RESOURCE),
}


def audit_note(**detail: Any) -> None:
    """Record, on the audit event of the tool call in progress, what the tool did. Long strings are
    cut; outside an audited call this does nothing."""
    notes = _notes.get()
    if notes is not None:
        notes.update(
            {
                key: value[:NOTE_MAX_CHARS] if isinstance(value, str) else value
                for key, value in detail.items()
            }
        )


def audit_failure(
    *,
    action: AuditAction,
    code: int,
    message: str,
    data: Any,
    scope: RateLimitScope,
    detail: dict[str, Any],
) -> tuple[AuditAction, AuditOutcome]:
    """How a call that failed with JSON-RPC ``code`` is recorded: a missing scope as
    ``permission.denied`` and a limit as ``rate.limited`` (both ``denied``, with their data), else
    ``action`` with outcome ``error`` and the message. Fills ``detail`` accordingly."""
    detail["code"] = code
    if code == PermissionDenied.jsonrpc_code:
        detail["data"] = data
        return AuditAction.PERMISSION_DENIED, AuditOutcome.DENIED
    if code == RateLimited.jsonrpc_code:
        detail["scope"] = scope.value
        detail["data"] = data
        return AuditAction.RATE_LIMITED, AuditOutcome.DENIED
    detail["message"] = message[:500]
    return action, AuditOutcome.ERROR


class AuditTrail:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        audited = AUDITED_METHODS.get(ctx.method)
        if ctx.request_id is None:
            return await call_next(ctx)
        if audited is None:
            return await _refusal_audited(ctx, call_next)
        action, limit_scope = audited
        params = ctx.params if isinstance(ctx.params, dict) else {}
        target = str(params.get("name" if ctx.method == "tools/call" else "uri", ""))
        detail: dict[str, Any] = {"method": ctx.method}
        via = getattr(ctx.request, "scope", {}).get(VIA_KEY)
        if via:
            # Run by something else on the caller's behalf (``pipeline.tool_runs``), not by the client.
            detail["via"] = via
        read_only = ctx.method == "resources/read"
        if ctx.method == "tools/call":
            spec = self.registry.get(target)
            read_only = spec is not None and spec.read_only
            detail["arguments"] = audit_arguments(
                params.get("arguments") or {},
                secret_names=spec.secret_arguments if spec is not None else frozenset(),
            )
        outcome = AuditOutcome.OK
        notes: dict[str, Any] = {}
        notes_token = _notes.set(notes)
        started = time.perf_counter()
        try:
            result = await call_next(ctx)
            if _is_tool_error(result):
                outcome = AuditOutcome.ERROR
                detail["isError"] = True
            return result
        except MCPError as error:
            action, outcome = audit_failure(
                action=action,
                code=error.error.code,
                message=error.error.message,
                data=error.error.data,
                scope=limit_scope,
                detail=detail,
            )
            raise
        except asyncio.CancelledError:
            outcome = AuditOutcome.ERROR
            detail["cancelled"] = True
            raise
        except Exception:
            # The guard translates every failure to MCPError; anything else is the SDK's own.
            outcome = AuditOutcome.ERROR
            raise
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            _notes.reset(notes_token)
            if notes:
                detail["result"] = notes
            entry = audit_entry(
                action=action,
                outcome=outcome,
                identity=identity_from_request(ctx.request),
                session_id=_session_id(ctx),
                target=target,
                duration_ms=round(elapsed_ms, 3),
                detail=detail,
            )
            if action == AuditAction.RATE_LIMITED:
                # One count per tool and limit: a rate and a cap on concurrent queries stay apart.
                data = detail.get("data")
                limit = data.get("limit", "") if isinstance(data, dict) else ""
                await audit_refusal_record_async(entry, key=f"{limit_scope.value}:{target}:{limit}")
            else:
                # A read that succeeded changed nothing: its row need not wait for the disk.
                await audit_record_async(entry, flushed=not (read_only and outcome == AuditOutcome.OK))


def _is_tool_error(result: Any) -> bool:
    if isinstance(result, dict):
        return bool(result.get("isError"))
    return bool(getattr(result, "is_error", False))


async def _refusal_audited(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """A method without a row of its own (a subscription, a prompt) leaves one when the guard
    refuses it a scope: a missing scope is worth an operator's look whatever was asked."""
    try:
        return await call_next(ctx)
    except MCPError as error:
        if error.error.code == PermissionDenied.jsonrpc_code:
            params = ctx.params if isinstance(ctx.params, dict) else {}
            entry = audit_entry(
                action=AuditAction.PERMISSION_DENIED,
                outcome=AuditOutcome.DENIED,
                identity=identity_from_request(ctx.request),
                session_id=_session_id(ctx),
                target=str(params.get("uri") or params.get("name") or ctx.method),
                detail={"method": ctx.method, "code": error.error.code, "data": error.error.data},
            )
            await audit_record_async(entry)
        raise


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str:
    session = getattr(ctx.request, "scope", {}).get(SESSION_KEY)
    return str(session.id) if session is not None else ""

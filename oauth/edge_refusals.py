"""Audit rows for what the MCP endpoint's ASGI layers refuse, and for what fails in them.

A refusal before any tool runs (a token refused, a session that is not the caller's, a foreign
Host or Origin) is evidence an operator may need, so each leaves a row; a failure nobody expected
leaves a ``server.error`` row. Every such row goes through ``edge_audit``. Refusals are counted
per caller (or address), action and reason and minute (``core.audit.refusals``), so someone
hammering the endpoint with a garbage token cannot bloat the table; failures are written one each.
The token itself is never recorded; the row names the token's database id when it is known.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from core.audit.refusals import audit_refusal_record_async
from core.audit.trail import audit_entry, audit_record_async
from core.identity import Identity
from core.models import AuditAction, AuditOutcome

logger = logging.getLogger(__name__)


async def edge_audit(
    *,
    action: AuditAction,
    outcome: AuditOutcome = AuditOutcome.DENIED,
    identity: Identity | None = None,
    session_id: str = "",
    target: str = "",
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Record one refusal or failure of the MCP endpoint's own layers; never raises."""
    entry = audit_entry(
        action=action,
        outcome=outcome,
        identity=identity,
        # The session id a client names can be anything: the column holds 64 characters.
        session_id=session_id[:64],
        target=target,
        detail=detail,
    )
    try:
        if outcome == AuditOutcome.DENIED:
            reason = str((detail or {}).get("reason", ""))[:100]
            await audit_refusal_record_async(entry, key=f"{target[:100]}:{reason}")
        else:
            await audit_record_async(entry)
    except Exception:
        # The answer to the client matters more than its row: it is still in the log.
        logger.exception("Audit row for a refused MCP request not written: %s", action)

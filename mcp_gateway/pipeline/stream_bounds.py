"""How many long-lived streams one person may hold on a worker, and how a refusal is recorded.

A stream (the handshake era's ``GET /mcp``, a ``subscriptions/listen`` response) holds a slot of
the worker and of its tenant for as long as the client keeps it. Without a bound per person, one
person's loop of streams fills the tenant's slots and locks everyone else of the tenant out. Both
kinds count against ``MCP_STREAMS_PER_PERSON`` separately (a client uses one kind or the other) and
refuse with the same error, -32000 naming the bound, and an audit row per refusal (counted per
minute, as the endpoint's other refusals are).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from core.conf import gatehouse_settings
from core.errors import TooManyOpen
from core.identity import Identity
from core.models import AuditAction
from oauth.edge_refusals import edge_audit

STREAMS_PER_PERSON = "streams_per_person"
STREAMS_PER_TENANT = "streams_per_tenant"
TOO_MANY_FOR_PERSON = "This person has too many open streams on this server; close one first."
TOO_MANY_FOR_TENANT = "This tenant has too many open streams on this server; close one first."


class PersonStreams:
    """Open streams of one kind per person on this worker."""

    def __init__(self) -> None:
        self._held: Counter[int] = Counter()

    def full(self, *, identity: Identity) -> bool:
        return self._held[identity.user_id] >= gatehouse_settings.MCP_STREAMS_PER_PERSON

    @contextmanager
    def holding(self, *, identity: Identity) -> Iterator[None]:
        self._held[identity.user_id] += 1
        try:
            yield
        finally:
            self._held[identity.user_id] -= 1
            if self._held[identity.user_id] <= 0:
                del self._held[identity.user_id]


async def stream_refused(
    *, identity: Identity, target: str, reason: str, limit: int, session_id: str = ""
) -> TooManyOpen:
    """Record a stream refused at a bound; the error to answer with."""
    await edge_audit(
        action=AuditAction.RATE_LIMITED,
        identity=identity,
        session_id=session_id,
        target=target,
        detail={"reason": reason, "limit": limit},
    )
    message = TOO_MANY_FOR_PERSON if reason == STREAMS_PER_PERSON else TOO_MANY_FOR_TENANT
    return TooManyOpen(message, reason=reason, limit=limit)

"""What the console shows of an upstream's OAuth sign-in: connected (by whom, when) or not, and an
attempt under way or failed. Never a token."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from upstreams.sign_in.models import AttemptOutcome, UpstreamGrant


@dataclass(frozen=True)
class SignInStatus:
    connected: bool
    connected_by: str = ""
    connected_at: datetime | None = None
    scope: str = ""
    # An attempt under way (someone is signing in now), or why the last one failed.
    connecting: bool = False
    last_error: str = ""


NOT_CONNECTED = SignInStatus(connected=False)


def upstream_sign_in_statuses(*, upstream_ids: Iterable[int]) -> dict[int, SignInStatus]:
    """The sign-in status of each of ``upstream_ids`` (``NOT_CONNECTED`` for one never connected)."""
    ids = list(upstream_ids)
    statuses = dict.fromkeys(ids, NOT_CONNECTED)
    now = timezone.now()
    for grant in UpstreamGrant.objects.filter(upstream_id__in=ids).select_related("connected_by"):
        pending = grant.attempt_outcome in (AttemptOutcome.PENDING, AttemptOutcome.DELIVERED)
        statuses[grant.upstream_id] = SignInStatus(
            connected=grant.connected,
            connected_by=grant.connected_by.username if grant.connected_by else "",
            connected_at=grant.connected_at if grant.connected else None,
            scope=grant.scope,
            connecting=pending and grant.attempt_expires is not None and grant.attempt_expires > now,
            last_error=grant.attempt_error if grant.attempt_outcome == AttemptOutcome.FAILED else "",
        )
    return statuses


def upstream_sign_in_connected(*, upstream_id: int) -> bool:
    """Whether Gatehouse holds tokens for the upstream (what its connection test needs)."""
    return UpstreamGrant.objects.filter(upstream_id=upstream_id).exclude(tokens_encrypted="").exists()

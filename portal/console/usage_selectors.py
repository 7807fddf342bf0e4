"""What the console's usage and audit section reads of a tenant's audit rows: one page of them, newest
first, the rows per day of the same filters, and the filtered rows for a CSV export.

Every query starts from the console's tenant and a range of ``created`` (the ``audit_tenant_created``
index). Pages are keyset pages: the next page starts strictly after the last row shown, by
(``created``, ``id``), so reading page 1,000 costs what page 1 does on a million rows; OFFSET would
read and discard every row before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate

from accounts.models import Membership
from core.models import AuditEvent, AuditOutcome
from mcp_gateway.kernel.registry import Registry

USAGE_PAGE_ROWS = 50
# Suggestions beside the exact-match filters; a tenant with more people types the name.
SUGGESTED_PEOPLE = 200


@dataclass(frozen=True)
class UsageFilters:
    """Validated filters (``portal.console.usage`` parses them); empty text means any."""

    first_day: date
    last_day: date
    person: str = ""
    target: str = ""
    action: str = ""
    outcome: str = ""


@dataclass(frozen=True)
class UsageCursor:
    """The last row of a page: the next page holds the rows strictly older than it."""

    created: datetime
    id: int

    def encoded(self) -> str:
        return f"{self.created.astimezone(UTC).isoformat()}|{self.id}"


@dataclass(frozen=True)
class UsageDay:
    day: date
    events: int = 0
    failed: int = 0  # any outcome but ok


@dataclass(frozen=True)
class UsagePage:
    events: list[AuditEvent]
    next_cursor: UsageCursor | None


def usage_event_list(*, tenant_id: int, filters: UsageFilters) -> QuerySet[AuditEvent]:
    """The tenant's audit rows matching ``filters``, newest first."""
    start = datetime.combine(filters.first_day, time.min, tzinfo=UTC)
    end = datetime.combine(filters.last_day + timedelta(days=1), time.min, tzinfo=UTC)
    events = AuditEvent.objects.filter(tenant_id=tenant_id, created__gte=start, created__lt=end)
    exact = {"username": filters.person, "target": filters.target}
    exact |= {"action": filters.action, "outcome": filters.outcome}
    events = events.filter(**{field: value for field, value in exact.items() if value})
    return events.order_by("-created", "-id")


def usage_page_read(*, tenant_id: int, filters: UsageFilters, before: UsageCursor | None = None) -> UsagePage:
    """One page of ``USAGE_PAGE_ROWS`` rows older than ``before`` (the first page without it)."""
    events = usage_event_list(tenant_id=tenant_id, filters=filters)
    if before is not None:
        # ``created <= c`` keeps the index's range; the OR only drops the rows of that same instant.
        events = events.filter(
            Q(created__lt=before.created) | Q(id__lt=before.id), created__lte=before.created
        )
    rows = list(
        events.only("id", "created", "action", "outcome", "username", "target", "duration_ms")[
            : USAGE_PAGE_ROWS + 1
        ]
    )
    shown = rows[:USAGE_PAGE_ROWS]
    more = len(rows) > USAGE_PAGE_ROWS
    return UsagePage(events=shown, next_cursor=UsageCursor(shown[-1].created, shown[-1].pk) if more else None)


def usage_day_list(*, tenant_id: int, filters: UsageFilters) -> list[UsageDay]:
    """Rows and failed or refused rows per UTC day of the range, every day present (zeros too)."""
    rows = {
        row["day"]: row
        for row in usage_event_list(tenant_id=tenant_id, filters=filters)
        .annotate(day=TruncDate("created", tzinfo=UTC))
        .values("day")
        .annotate(events=Count("id"), failed=Count("id", filter=~Q(outcome=AuditOutcome.OK)))
        .order_by()
    }
    days = []
    day = filters.first_day
    while day <= filters.last_day:
        row = rows.get(day)
        days.append(
            UsageDay(day=day, events=row["events"], failed=row["failed"]) if row else UsageDay(day=day)
        )
        day += timedelta(days=1)
    return days


@dataclass(frozen=True)
class UsageSuggestions:
    """Values the person and tool filters offer as they are typed (they still match exactly)."""

    people: list[str]
    tools: list[str]


def usage_suggestion_list(*, tenant_id: int, registry: Registry) -> UsageSuggestions:
    """The tenant's members by username and the tools this deployment serves, each sorted.

    Read from the memberships and the registry, not from the audit rows: a ``DISTINCT`` over a
    million rows would cost more than the page it helps to filter.
    """
    people = Membership.objects.filter(tenant_id=tenant_id).order_by("user__username")
    tools = sorted({spec.name for spec in registry.tools})
    return UsageSuggestions(
        people=list(people.values_list("user__username", flat=True)[:SUGGESTED_PEOPLE]), tools=tools
    )

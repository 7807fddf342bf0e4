"""The console's usage and audit section: the tenant's audit rows, filtered by person, tool, action,
outcome and UTC day range, 50 a page (keyset pages, ``usage_selectors``), the rows per day as a chart
and a table, and ``usage.csv``: exactly the filtered rows. Any member of the tenant may read them.

The filters are parsed here, at the boundary: a value no lookup could use (a NUL, an invisible
character, too long, a date that is not one) is the page's own message with status 400, never a 500.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from core.audit.export import audit_csv_lines
from core.csv_export import csv_response
from core.errors import InvalidInput
from core.models import AuditAction, AuditOutcome
from core.text_safety import text_cleaned, text_invisible_character
from mcp_gateway.kernel.registry import default_registry
from oauth.parameter_guard import request_unsafe_parameter
from portal.console.access import ConsoleTenant
from portal.console.pages import console_page, console_render
from portal.console.usage_selectors import (
    UsageCursor,
    UsageFilters,
    usage_day_list,
    usage_event_list,
    usage_page_read,
    usage_suggestion_list,
)

DEFAULT_DAYS = 7
MAX_DAYS = 366
CSV_MAX_ROWS = 100_000
# The longest value each text filter's column holds (AuditEvent.username and .target).
TEXT_FILTERS = {"person": ("Person", 150), "tool": ("Tool or target", 500)}

TOO_LONG = "{label} is too long ({limit} characters at most)."
INVISIBLE = "{label} contains an invisible character ({code}); type the value itself."
NOT_A_DATE = "{label} is not a date: use YYYY-MM-DD."
TO_BEFORE_FROM = "The range ends ({last}) before it starts ({first})."
RANGE_TOO_LONG = "The range is {days} days; choose at most {limit}."
UNKNOWN_CHOICE = "{label} {value!r} is not one of the choices."
BAD_CURSOR = "The page link is damaged; start again from the first page."
CSV_TOO_MANY = (
    "More than {limit:,} rows match: the export takes at most {limit:,}. Narrow the filters or the days."
)
TEMPLATE = "console/usage.html"


@dataclass(frozen=True)
class _Query:
    """The filters as the form shows them again (cleaned of anything unprintable)."""

    person: str = ""
    tool: str = ""
    action: str = ""
    outcome: str = ""
    first: str = ""
    last: str = ""


@require_GET
@console_page
def usage(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    """One page of the filtered rows and the rows per day of the whole range."""
    shown = _shown(request.GET)
    try:
        filters = usage_filters_parse(request=request, today=_today())
        before = usage_cursor_parse(str(request.GET.get("before", "")))
    except InvalidInput as error:
        return _page(request, console, shown=shown, error=error.message, status=400)
    page = usage_page_read(tenant_id=console.tenant.pk, filters=filters, before=before)
    days = usage_day_list(tenant_id=console.tenant.pk, filters=filters)
    return _page(
        request, console, shown=shown, filters=filters, page=page, days=days, paged=before is not None
    )


@require_GET
@console_page
def usage_csv(request: HttpRequest, console: ConsoleTenant) -> HttpResponse | StreamingHttpResponse:
    """Every row the filters match (all pages), through the audit trail's CSV writer."""
    shown = _shown(request.GET)
    try:
        filters = usage_filters_parse(request=request, today=_today())
    except InvalidInput as error:
        return _page(request, console, shown=shown, error=error.message, status=400)
    events = usage_event_list(tenant_id=console.tenant.pk, filters=filters)
    # Counting a slice stops at the bound, however many rows there are.
    if events[: CSV_MAX_ROWS + 1].count() > CSV_MAX_ROWS:
        return _page(request, console, shown=shown, error=CSV_TOO_MANY.format(limit=CSV_MAX_ROWS), status=400)
    return csv_response(
        request=request, lines=audit_csv_lines(events=events), filename_prefix=f"audit-{console.tenant.slug}"
    )


def usage_filters_parse(*, request: HttpRequest, today: date) -> UsageFilters:
    """The query's filters, or ``InvalidInput`` saying which value is wrong and why."""
    problem = request_unsafe_parameter(request)
    if problem is not None:
        raise InvalidInput(problem)
    query = request.GET
    text = {name: _text(query, name, label, limit) for name, (label, limit) in TEXT_FILTERS.items()}
    action = _choice(query, "action", "Action", AuditAction.values)
    outcome = _choice(query, "outcome", "Outcome", AuditOutcome.values)
    last = _date(query, "to", "To") or today
    first = _date(query, "from", "From") or last - timedelta(days=DEFAULT_DAYS - 1)
    if last < first:
        raise InvalidInput(TO_BEFORE_FROM.format(first=first, last=last))
    days = (last - first).days + 1
    if days > MAX_DAYS:
        raise InvalidInput(RANGE_TOO_LONG.format(days=days, limit=MAX_DAYS))
    return UsageFilters(
        first_day=first,
        last_day=last,
        person=text["person"],
        target=text["tool"],
        action=action,
        outcome=outcome,
    )


def usage_cursor_parse(value: str) -> UsageCursor | None:
    """``<created ISO 8601>|<id>`` (``UsageCursor.encoded``); None when empty."""
    if not value:
        return None
    created, _, pk = value.partition("|")
    try:
        when = datetime.fromisoformat(created)
        number = int(pk)
    except ValueError:
        raise InvalidInput(BAD_CURSOR) from None
    if when.tzinfo is None or not 0 < number < 2**63 or len(value) > 64:
        raise InvalidInput(BAD_CURSOR)
    return UsageCursor(created=when, id=number)


def _text(query: QueryDict, name: str, label: str, limit: int) -> str:
    value = str(query.get(name, "")).strip()
    if len(value) > limit:
        raise InvalidInput(TOO_LONG.format(label=label, limit=limit))
    code = text_invisible_character(value)
    if code is not None:
        raise InvalidInput(INVISIBLE.format(label=label, code=code))
    return value


def _choice(query: QueryDict, name: str, label: str, choices: list[str]) -> str:
    value = str(query.get(name, ""))
    if value and value not in choices:
        raise InvalidInput(UNKNOWN_CHOICE.format(label=label, value=text_cleaned(value)[:60]))
    return value


def _date(query: QueryDict, name: str, label: str) -> date | None:
    value = str(query.get(name, "")).strip()
    if not value:
        return None
    try:
        if len(value) != 10:
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(NOT_A_DATE.format(label=label)) from None


def _shown(query: QueryDict) -> _Query:
    def clean(name: str) -> str:
        return text_cleaned(str(query.get(name, "")))[:500]

    return _Query(
        person=clean("person"),
        tool=clean("tool"),
        action=clean("action"),
        outcome=clean("outcome"),
        first=clean("from"),
        last=clean("to"),
    )


def _today() -> date:
    return timezone.now().astimezone(UTC).date()


def _page(
    request: HttpRequest,
    console: ConsoleTenant,
    *,
    shown: _Query,
    error: str = "",
    status: int = 200,
    **found: object,
) -> HttpResponse:
    filters = found.get("filters")
    if isinstance(filters, UsageFilters):
        # The form shows the range the rows are of, defaults included.
        shown = _Query(
            person=shown.person,
            tool=shown.tool,
            action=shown.action,
            outcome=shown.outcome,
            first=filters.first_day.isoformat(),
            last=filters.last_day.isoformat(),
        )
    query = QueryDict(mutable=True)
    for name, value in (
        ("person", shown.person),
        ("tool", shown.tool),
        ("action", shown.action),
        ("outcome", shown.outcome),
        ("from", shown.first),
        ("to", shown.last),
    ):
        if value and not error:
            query[name] = value
    context = {
        "shown": shown,
        "error": error,
        "actions": AuditAction.choices,
        "outcomes": AuditOutcome.choices,
        "filter_query": query.urlencode(),
        "max_days": MAX_DAYS,
        "csv_max_rows": f"{CSV_MAX_ROWS:,}",
        "suggestions": usage_suggestion_list(tenant_id=console.tenant.pk, registry=default_registry()),
        **found,
    }
    return console_render(request, console, TEMPLATE, context, status=status)

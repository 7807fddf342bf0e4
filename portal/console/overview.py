"""The console's front page: what the tenant used in the last 30 days (``overview_selectors``), as
figures and tables in the page and as ``overview.json`` for the charts its script draws."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from accounts.models import User
from core.audit.rollup.selectors import ToolDay, ToolUse
from language_models.governed.totals import Spent
from portal.console.access import ConsoleTenant, console_first_tenant
from portal.console.overview_selectors import Overview, overview_read
from portal.console.pages import console_data, console_page, console_render

NO_TENANT = "You belong to no tenant yet: ask an administrator for an invitation."


@never_cache
@login_required
def console_home(request: HttpRequest) -> HttpResponse:
    """``/console/``: the person's first tenant (by name)."""
    assert isinstance(request.user, User)
    chosen = str(request.GET.get("tenant", ""))
    if chosen:
        # The switcher's choice; console_page refuses a tenant that is not the person's.
        return redirect("console:overview", slug=chosen) if _slug_like(chosen) else redirect("console:home")
    tenant = console_first_tenant(person=request.user)
    if tenant is None:
        return render(request, "console/refused.html", {"message": NO_TENANT}, status=404)
    return redirect("console:overview", slug=tenant.slug)


@console_page
def overview(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    """The figures and every chart's table, readable without the script; the charts come from
    ``overview_data``."""
    found = overview_read(tenant_id=console.tenant.pk, now=timezone.now())
    return console_render(request, console, "console/overview.html", {"overview": found})


@console_data
def overview_data(request: HttpRequest, console: ConsoleTenant) -> JsonResponse:
    """``overview.json``: the overview's numbers, for any member of the tenant."""
    return JsonResponse(overview_json(overview_read(tenant_id=console.tenant.pk, now=timezone.now())))


def traffic_days_json(
    *, tool_days: list[ToolDay], model_days: list[tuple[date, Spent]]
) -> list[dict[str, Any]]:
    """Each day's tool calls and model spend, as the overview's and the operators' charts read them."""
    costs = dict(model_days)
    return [
        {
            "day": day.day.isoformat(),
            "calls": day.calls,
            "errors": day.errors,
            "p50Ms": day.p50_ms,
            "p95Ms": day.p95_ms,
            "modelCalls": costs[day.day].calls,
            "tokens": costs[day.day].total_tokens,
            "cost": costs[day.day].cost,
        }
        for day in tool_days
    ]


def busiest_tools_json(tools: list[ToolUse]) -> list[dict[str, Any]]:
    return [{"name": t.name, "calls": t.calls, "errors": t.errors} for t in tools]


def overview_json(found: Overview) -> dict[str, Any]:
    return {
        "firstDay": found.first_day.isoformat(),
        "lastDay": found.last_day.isoformat(),
        "totals": {
            "calls": found.calls,
            "errors": found.errors,
            "liveSessions": found.sessions_live,
            "connectedClients": found.clients_connected,
        },
        "days": traffic_days_json(tool_days=found.tool_days, model_days=found.model_days),
        "tools": busiest_tools_json(found.busiest_tools),
        "budgets": [
            {
                "period": b.period,
                "person": b.person or None,
                "tokens": None if b.max_tokens is None else {"spent": b.tokens_spent, "limit": b.max_tokens},
                "cost": None if b.max_cost is None else {"spent": b.cost_spent, "limit": b.max_cost},
                "resetsAt": b.resets_at.isoformat().replace("+00:00", "Z"),
            }
            for b in found.budgets
        ],
        "clients": [{"name": c.name, "liveTokens": c.live_tokens} for c in found.clients],
    }


def _slug_like(value: str) -> bool:
    return len(value) <= 63 and all(c.isascii() and (c.isalnum() or c in "-_") for c in value)

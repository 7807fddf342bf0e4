"""The console's front page: what the tenant used in the last 30 days (``overview_selectors``), as
figures and tables in the page and as ``overview.json`` for the charts its script draws."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from accounts.models import User
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


def overview_json(found: Overview) -> dict[str, Any]:
    costs = {day: spent for day, spent in found.model_days}
    return {
        "firstDay": found.first_day.isoformat(),
        "lastDay": found.last_day.isoformat(),
        "totals": {
            "calls": found.calls,
            "errors": found.errors,
            "liveSessions": found.sessions_live,
            "connectedClients": found.clients_connected,
        },
        "days": [
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
            for day in found.tool_days
        ],
        "tools": [{"name": t.name, "calls": t.calls, "errors": t.errors} for t in found.busiest_tools],
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

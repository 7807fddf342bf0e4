"""The admin's index with the operators' dashboard on top, and ``/admin/dashboard.json`` for the
charts its script draws (``static/portal/operator-dashboard.js``).

Who sees it: active staff who may view the audit trail (``core.view_auditevent``; superusers have
every permission). The dashboard is the audit trail summed over every tenant, so it is shown to
exactly the people the admin already lets read that trail row by row. Other staff see the index as
before, and the JSON answers them 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.errors import PermissionDenied
from portal.console.overview import busiest_tools_json, traffic_days_json
from portal.operator.health import UPSTREAM_WINDOW, WORKERS_WINDOW, Health, health_read
from portal.operator.selectors import Traffic, traffic_read

DASHBOARD_PERMISSION = "core.view_auditevent"
NOT_PERMITTED = "The operators' dashboard is for staff who may view the audit trail."


@dataclass(frozen=True)
class Dashboard:
    traffic: Traffic
    health: Health


def dashboard_permitted(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff and user.has_perm(DASHBOARD_PERMISSION))


def dashboard_read(*, now: datetime) -> Dashboard:
    return Dashboard(traffic=traffic_read(now=now), health=health_read(now=now))


def admin_index(request: HttpRequest) -> HttpResponse:
    """The admin's own index (``AdminSite.index``), given the dashboard when the person may see it.
    Reached through ``admin_view`` (urls.py): staff only, never cached, as every admin page."""
    extra: dict[str, Any] = {}
    if dashboard_permitted(request):
        extra["dashboard"] = dashboard_read(now=timezone.now())
    return admin.site.index(request, extra_context=extra)


@never_cache
@require_GET
def dashboard_data(request: HttpRequest) -> HttpResponse:
    """``/admin/dashboard.json``: the dashboard's numbers. Someone signed out is sent to the admin's
    sign-in, as by any admin URL; anyone else not permitted gets a 403 (JSON unless they ask for HTML)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("admin:login"))
    if not dashboard_permitted(request):
        raise PermissionDenied(NOT_PERMITTED)
    return JsonResponse(dashboard_json(dashboard_read(now=timezone.now())))


def dashboard_json(found: Dashboard) -> dict[str, Any]:
    traffic, health = found.traffic, found.health
    return {
        "firstDay": traffic.first_day.isoformat(),
        "lastDay": traffic.last_day.isoformat(),
        "totals": {
            "calls": traffic.calls,
            "errors": traffic.errors,
            "cost": traffic.cost,
            "tenantsActive": traffic.tenants_active,
        },
        "days": traffic_days_json(tool_days=traffic.tool_days, model_days=traffic.model_days),
        "tools": busiest_tools_json(traffic.busiest_tools),
        "tenants": [
            {
                "slug": t.slug,
                "name": t.name,
                "calls": t.calls,
                "errors": t.errors,
                "modelCalls": t.model_calls,
                "tokens": t.tokens,
                "cost": t.cost,
            }
            for t in traffic.busiest_tenants
        ],
        "health": _health_json(health),
    }


def _health_json(health: Health) -> dict[str, Any]:
    backlog, spool = health.backlog, health.spool
    return {
        "checkedAt": _instant(health.checked_at),
        "workers": {
            "windowSeconds": int(WORKERS_WINDOW.total_seconds()),
            "seen": [
                {"name": w.name, "lastSeen": _instant(w.last_seen), "stepsRunning": w.steps_running}
                for w in health.workers
            ],
        },
        "backlog": {
            "tasksReady": backlog.tasks_ready,
            "oldestReady": _instant(backlog.oldest_ready),
            "tasksRunning": backlog.tasks_running,
            "jobsRunning": backlog.jobs_running,
            "jobsStalled": backlog.jobs_stalled,
            "jobsWaiting": backlog.jobs_waiting,
        },
        "upstreams": {
            "windowSeconds": int(UPSTREAM_WINDOW.total_seconds()),
            "enabled": health.upstreams_enabled,
            "called": health.upstreams_with_calls,
            "failing": health.upstreams_failing,
            "list": [
                {
                    "tenant": u.tenant_slug,
                    "name": u.name,
                    "calls": u.calls,
                    "unavailable": u.unavailable,
                    "lastUnavailable": _instant(u.last_unavailable),
                    "lastAnswered": _instant(u.last_answered),
                    "failing": u.failing,
                }
                for u in health.upstreams
            ],
        },
        "spool": {
            "directory": spool.directory,
            "files": spool.files,
            "rows": spool.rows,
            "unreadable": spool.unreadable,
        },
    }


def _instant(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")

"""``GET /health`` (liveness) and ``GET /health/ready`` (readiness), for load balancers and probes.

Both answer ``{status, version, uptime_seconds, timestamp}`` so one look tells which build is
running and since when, plus ``reasons`` when the status is not ``ok``. No authentication, and
nothing in them an outsider could use.

* ``/health``: 200 while the process can serve, ``status`` ``ok`` or ``degraded`` (it serves, but
  something is wrong: the rate-limit storage does not answer and limits are counted per process);
  503 ``unavailable`` when the database does not answer. A liveness probe: restarting a process
  does not bring Redis back.
* ``/health/ready``: 200 only when ``ok``; 503 when degraded or unavailable. A readiness probe
  (Kubernetes ``readinessProbe``): take the process out of rotation while it cannot keep the limits
  shared. It keeps asking the storage, so it becomes ready again by itself.
"""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError, version

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.ratelimit.fallback import rate_limit_outage
from core.ratelimit.limits import rate_limit_storage_probe

_STARTED = time.monotonic()
OK, DEGRADED, UNAVAILABLE = "ok", "degraded", "unavailable"
DATABASE_UNAVAILABLE = "database does not answer"


def _version() -> str:
    try:
        return version("gatehouse")
    except PackageNotFoundError:
        return "unknown"


def database_answers() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError:
        return False
    return True


def _status() -> tuple[str, list[str]]:
    if not database_answers():
        return UNAVAILABLE, [DATABASE_UNAVAILABLE]
    rate_limit_storage_probe()
    outage = rate_limit_outage()
    if outage is not None:
        return DEGRADED, [outage.reason]
    return OK, []


def _answer(*, ready: bool) -> JsonResponse:
    status, reasons = _status()
    body: dict[str, object] = {
        "status": status,
        "version": _version(),
        "uptime_seconds": round(time.monotonic() - _STARTED, 1),
        "timestamp": timezone.now().isoformat(),
    }
    if reasons:
        body["reasons"] = reasons
    serving = status == OK if ready else status != UNAVAILABLE
    return JsonResponse(body, status=200 if serving else 503)


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    return _answer(ready=False)


@never_cache
@require_GET
def health_ready(request: HttpRequest) -> JsonResponse:
    return _answer(ready=True)

"""``GET /health``: is this process up, and can it reach its database?

For load balancers and uptime checks: 200 when the database answers, 503 when it does not, in both
cases with ``{status, version, uptime_seconds, timestamp}`` so one look tells which build is
running and since when. No authentication, and nothing in it an outsider could use.
"""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError, version

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

_STARTED = time.monotonic()


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


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    healthy = database_answers()
    body = {
        "status": "ok" if healthy else "unavailable",
        "version": _version(),
        "uptime_seconds": round(time.monotonic() - _STARTED, 1),
        "timestamp": timezone.now().isoformat(),
    }
    return JsonResponse(body, status=200 if healthy else 503)

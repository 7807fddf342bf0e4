"""The product's URLs plus views that fail the way a bug would, for the server-error tests (and the
settings module ``tests.support.server_error_settings`` that serves them under Daphne)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from config.urls import urlpatterns as product_urlpatterns

# A secret-looking message: the audit row and the answer must never carry it.
FAILURE_MESSAGE = "bug with secret=hunter2 in its message"


class DeliberateBug(RuntimeError):
    pass


# Exempt as the OAuth endpoints are, so a machine's POST reaches it.
@csrf_exempt
def fail(request: HttpRequest) -> HttpResponse:
    raise DeliberateBug(FAILURE_MESSAGE)


urlpatterns = [
    path("oauth/fail/", fail),
    path("accounts/fail/", fail),
    *product_urlpatterns,
]

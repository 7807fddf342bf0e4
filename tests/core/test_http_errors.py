"""A GatehouseError raised by a page or an OAuth endpoint becomes one consistent HTTP answer."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponse
from django.test import RequestFactory

from core.errors import NotFound, PermissionDenied, RateLimited
from core.http_errors import GatehouseErrorMiddleware

HTML = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"


@pytest.fixture
def middleware() -> GatehouseErrorMiddleware:
    return GatehouseErrorMiddleware(lambda request: HttpResponse())


def test_an_oauth_endpoint_answers_json_in_the_oauth_error_shape(rf: RequestFactory, middleware):
    response = middleware.process_exception(rf.post("/oauth/register/", HTTP_ACCEPT=HTML), PermissionDenied())
    assert response is not None
    assert response.status_code == 403
    assert json.loads(response.content) == {
        "error": "access_denied",
        "error_description": PermissionDenied.default_message,
    }
    assert response["Cache-Control"] == "no-store"


def test_a_rate_limit_refusal_says_when_to_retry(rf: RequestFactory, middleware):
    refusal = RateLimited(limit="2 per 1 minute", retry_after_seconds=17)
    response = middleware.process_exception(rf.post("/oauth/token/"), refusal)
    assert response is not None
    assert response.status_code == 429
    assert response["Retry-After"] == "17"
    assert json.loads(response.content) == {"error": "rate_limited", "error_description": refusal.message}


def test_a_browser_on_a_page_gets_a_page(rf: RequestFactory, middleware):
    refusal = RateLimited(limit="2 per 1 minute", retry_after_seconds=5)
    response = middleware.process_exception(rf.get("/oauth/authorize/", HTTP_ACCEPT=HTML), refusal)
    assert response is not None
    assert response.status_code == 429
    assert response["Content-Type"].startswith("text/html")
    assert response["Retry-After"] == "5"
    assert refusal.message in response.content.decode()


def test_a_caller_that_did_not_ask_for_html_gets_json_even_from_a_page(rf: RequestFactory, middleware):
    response = middleware.process_exception(rf.get("/accounts/login/", HTTP_ACCEPT="*/*"), NotFound())
    assert response is not None
    assert response.status_code == 404
    assert json.loads(response.content)["error"] == "not_found"


def test_django_s_own_client_errors_are_left_to_django(rf: RequestFactory, middleware):
    # Unexpected exceptions are answered here too: tests/core/test_server_errors.py.
    assert middleware.process_exception(rf.get("/oauth/token/"), Http404()) is None
    assert middleware.process_exception(rf.get("/oauth/token/"), SuspiciousOperation()) is None

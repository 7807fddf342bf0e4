"""A view that fails unexpectedly answers the endpoint's own 500 and leaves a ``server.error`` audit
row with the request id, method, path and exception class, and nothing of the message, the query
string or the body."""

from __future__ import annotations

import pytest
from django.test import Client

from core.http_errors import SERVER_ERROR, SERVER_ERROR_MESSAGE
from core.models import AuditAction, AuditEvent, AuditOutcome
from tests.support.server_error_urls import FAILURE_MESSAGE

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.support.server_error_urls")]

HTML = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"
EXCEPTION = "tests.support.server_error_urls.DeliberateBug"


@pytest.fixture
def browser() -> Client:
    return Client(raise_request_exception=False)


def _only_event() -> AuditEvent:
    [event] = AuditEvent.objects.filter(action=AuditAction.SERVER_ERROR)
    return event


def _assert_nothing_secret(event: AuditEvent) -> None:
    stored = f"{event.target} {event.detail}"
    for secret in ("hunter2", "code=", "s3cret"):
        assert secret not in stored


def test_an_oauth_endpoint_answers_server_error_in_the_oauth_shape_and_is_audited(browser):
    response = browser.post(
        "/oauth/fail/?code=s3cret", {"client_secret": "s3cret"}, HTTP_X_REQUEST_ID="req-server-error-1"
    )
    assert response.status_code == 500
    assert response.json() == {"error": SERVER_ERROR, "error_description": SERVER_ERROR_MESSAGE}
    assert response["Cache-Control"] == "no-store"
    assert FAILURE_MESSAGE not in response.content.decode()
    event = _only_event()
    assert event.outcome == AuditOutcome.ERROR
    assert event.target == "/oauth/fail/"
    assert event.detail == {"method": "POST", "exception": EXCEPTION}
    _assert_nothing_secret(event)


def test_a_page_answers_the_500_page_and_is_audited_with_who_asked(browser, owner):
    browser.force_login(owner.user)
    response = browser.get("/accounts/fail/?next=s3cret", HTTP_ACCEPT=HTML)
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    assert FAILURE_MESSAGE not in response.content.decode()
    event = _only_event()
    assert event.user_id == owner.user_id
    assert event.detail == {"method": "GET", "exception": EXCEPTION}
    _assert_nothing_secret(event)


def test_a_django_404_is_not_a_server_error(browser):
    assert browser.get("/oauth/nowhere/").status_code == 404
    assert not AuditEvent.objects.filter(action=AuditAction.SERVER_ERROR).exists()

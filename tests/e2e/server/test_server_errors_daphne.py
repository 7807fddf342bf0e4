"""A view that fails unexpectedly, on a real Daphne process: the endpoint's own 500, and one
``server.error`` audit row under the request's id, with nothing of the message or the query."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

from core.http_errors import SERVER_ERROR, SERVER_ERROR_MESSAGE
from core.models import AuditAction, AuditEvent, AuditOutcome
from tests.e2e.conftest import _serve
from tests.e2e.harness import DaphneServer
from tests.support.server_error_urls import FAILURE_MESSAGE

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def failing_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(
        tmp_path_factory,
        database_url,
        "failing-views",
        DJANGO_SETTINGS_MODULE="tests.support.server_error_settings",
    )


async def test_a_failing_oauth_endpoint_answers_server_error_and_leaves_an_audit_row(failing_server):
    request_id = "e2e-" + secrets.token_hex(8)
    async with httpx.AsyncClient(base_url=failing_server.base_url, timeout=30) as http:
        response = await http.post(
            "/oauth/fail/?code=s3cret", data={"client_secret": "s3cret"}, headers={"X-Request-Id": request_id}
        )
    assert response.status_code == 500
    assert response.json() == {"error": SERVER_ERROR, "error_description": SERVER_ERROR_MESSAGE}
    events = [event async for event in AuditEvent.objects.filter(request_id=request_id)]
    assert [(e.action, e.outcome) for e in events] == [(AuditAction.SERVER_ERROR, AuditOutcome.ERROR)]
    [event] = events
    assert event.target == "/oauth/fail/"
    assert event.detail == {"method": "POST", "exception": "tests.support.server_error_urls.DeliberateBug"}
    assert "s3cret" not in f"{event.target} {event.detail}"
    # The traceback is in the server's log, for whoever fixes the bug.
    assert FAILURE_MESSAGE in failing_server.log()


async def test_a_failing_page_answers_the_500_page(failing_server):
    async with httpx.AsyncClient(base_url=failing_server.base_url, timeout=30) as http:
        response = await http.get("/accounts/fail/", headers={"Accept": "text/html"})
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/html")
    assert FAILURE_MESSAGE not in response.text

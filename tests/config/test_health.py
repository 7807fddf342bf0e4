"""``GET /health`` for load balancers: up, version, uptime, and whether the database answers."""

from __future__ import annotations

from datetime import datetime

import pytest

from config import health
from tests.support.ratelimit_support import TEST_REDIS_URL

pytestmark = pytest.mark.django_db


def test_health_reports_ok_with_version_and_uptime(client):
    response = client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["version"] == "0.1.0"
    assert body["uptime_seconds"] >= 0
    assert datetime.fromisoformat(body["timestamp"]).tzinfo is not None
    assert "no-cache" in response["Cache-Control"]


def test_health_says_unavailable_when_the_database_does_not_answer(client, monkeypatch):
    monkeypatch.setattr(health, "database_answers", lambda: False)
    response = client.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"


def test_health_only_answers_get(client):
    assert client.post("/health").status_code == 405


def _rate_limit_storage(settings, url: str) -> None:
    settings.GATEHOUSE = {**settings.GATEHOUSE, "RATE_LIMIT_STORAGE_URL": url}


def test_health_and_readiness_are_ok_while_the_rate_limit_storage_answers(client, settings):
    _rate_limit_storage(settings, TEST_REDIS_URL)
    assert client.get("/health").json()["status"] == "ok"
    ready = client.get("/health/ready")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ok"
    assert "reasons" not in ready.json()


def test_with_the_rate_limit_storage_down_health_is_degraded_and_readiness_fails(client, settings):
    # Nothing listens on port 1. No request was limited yet: the check itself notices.
    _rate_limit_storage(settings, "redis://127.0.0.1:1/0")
    response = client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    [reason] = body["reasons"]
    assert "rate limit storage unreachable" in reason
    assert "counted per process" in reason

    ready = client.get("/health/ready")
    assert ready.status_code == 503
    assert ready.json()["status"] == "degraded"
    assert "no-cache" in ready["Cache-Control"]


def test_readiness_fails_when_the_database_does_not_answer(client, monkeypatch):
    monkeypatch.setattr(health, "database_answers", lambda: False)
    response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"

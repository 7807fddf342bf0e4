"""``GET /health`` for load balancers: up, version, uptime, and whether the database answers."""

from __future__ import annotations

from datetime import datetime

import pytest

from config import health

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

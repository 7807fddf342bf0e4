"""``GET /health`` on a real Daphne process, as a load balancer would ask."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.django_db


def test_the_running_server_answers_health(server):
    response = httpx.get(f"{server.base_url}/health", timeout=10)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"

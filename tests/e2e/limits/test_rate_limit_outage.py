"""A server whose Redis is unreachable still limits: it counts per process (sign-in at its stricter
fallback limit), reports ``degraded`` on ``/health``, fails ``/health/ready``, counts the outage in
``/metrics`` and logs one warning for it.

Redis is "unreachable" by pointing this server's ``REDIS_URL`` at a port where nothing listens;
the shared Redis that other tests and processes use is never touched.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.ratelimit.fallback import FALLBACK_BEGAN
from core.ratelimit.processes import SEVERAL_PROCESSES
from tests.e2e.conftest import _serve
from tests.e2e.harness import DaphneServer, parse_form
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

LOGIN_FALLBACK = 2


@pytest.fixture(scope="module")
def cut_off_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(
        tmp_path_factory,
        database_url,
        "redis-unreachable",
        # Nothing listens on port 1: every connection is refused.
        REDIS_URL="redis://127.0.0.1:1/0",
        TRUSTED_PROXY_COUNT="1",
        RATE_LIMIT_LOGIN="5/minute",
        RATE_LIMIT_LOGIN_FALLBACK=f"{LOGIN_FALLBACK}/minute",
        RATE_LIMIT_REGISTER="3/hour",
    )


@pytest.fixture
async def http(cut_off_server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=cut_off_server.base_url, follow_redirects=False, timeout=30) as c:
        yield c


def _address() -> str:
    # 198.18.0.0/15 is for benchmarks, never a real client.
    return f"198.{18 + secrets.randbelow(2)}.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"


async def _login(http: httpx.AsyncClient, *, address: str, username: str, password: str) -> httpx.Response:
    headers = {"X-Forwarded-For": address}
    page = await http.get("/accounts/login/", headers=headers)
    fields = {**parse_form(page.text)["fields"], "username": username, "password": password}
    return await http.post("/accounts/login/", data=fields, headers=headers)


async def test_sign_in_is_still_limited_at_the_stricter_fallback_limit(http, committed):
    person = committed(UserFactory)
    address = _address()
    for _ in range(LOGIN_FALLBACK):
        failed = await _login(http, address=address, username=person.username, password="wrong")
        assert failed.status_code == 200
    # The right password is not even checked: under the normal limit (5) this would have signed in.
    refused = await _login(http, address=address, username=person.username, password=DEFAULT_PASSWORD)
    assert refused.status_code == 429
    assert "sessionid" not in refused.cookies


async def test_registration_is_still_limited_per_process(http):
    headers = {"X-Forwarded-For": _address()}
    body = {
        "client_name": "outage",
        "redirect_uris": ["http://127.0.0.1:9/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    answers = [
        (await http.post("/oauth/register/", json=body, headers=headers)).status_code for _ in range(4)
    ]
    assert answers == [201, 201, 201, 429]


async def test_health_says_degraded_with_the_reason_and_readiness_fails(http):
    health = await http.get("/health")
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "degraded"
    [reason] = body["reasons"]
    assert "rate limit storage unreachable" in reason

    ready = await http.get("/health/ready")
    assert ready.status_code == 503
    assert ready.json()["status"] == "degraded"


async def test_the_outage_is_counted_once_in_metrics_and_warned_about_once_in_the_log(http, cut_off_server):
    await _login(http, address=_address(), username="nobody", password="wrong")
    await _login(http, address=_address(), username="nobody", password="wrong")
    scrape = await http.get("/metrics")
    assert scrape.status_code == 200
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(scrape.text)
        for sample in family.samples
    }
    assert samples["gatehouse_rate_limit_fallbacks_total"] == 1
    assert samples["gatehouse_rate_limit_fallback_active"] == 1
    log = cut_off_server.log()
    assert log.count(FALLBACK_BEGAN) == 1
    # With REDIS_URL set, nobody counts the processes at start.
    assert SEVERAL_PROCESSES.split(":")[0] not in log

"""Rate limits never switch off: while the shared storage does not answer, each process counts alone
(sign-in at its stricter fallback), says so once, and returns to the shared count by itself."""

from __future__ import annotations

import asyncio
import logging

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from prometheus_client import REGISTRY

from core.errors import RateLimited
from core.models import RateLimitScope
from core.ratelimit import fallback as ratelimit_fallback
from core.ratelimit.fallback import FALLBACK_BEGAN, FALLBACK_ENDED, rate_limit_outage
from core.ratelimit.limits import rate_limit_call, rate_limit_http
from tests.support.factories import IdentityFactory
from tests.support.switchable_redis import SwitchableRedis

# Nothing listens on port 1: connections are refused at once.
DEAD_REDIS_URL = "redis://127.0.0.1:1/0"
NO_LIMITS = dict.fromkeys(["tool", "tool_expensive", "resource", "authorize", "login", "register"])
LOGIN = RateLimitScope.LOGIN


@pytest.fixture
def limits_config(settings):
    def configure(*, storage_url: str, login_fallback: str | None = "2/minute", **defaults: str) -> None:
        settings.GATEHOUSE = {
            **settings.GATEHOUSE,
            "RATE_LIMIT_STORAGE_URL": storage_url,
            "RATE_LIMIT_RULE_CACHE_SECONDS": 0,
            "RATE_LIMITS": {**NO_LIMITS, **defaults},
            "RATE_LIMIT_LOGIN_FALLBACK": login_fallback,
        }

    return configure


@pytest.fixture
def no_pause(monkeypatch):
    """The shared storage is asked again at the next call, not seconds later."""
    monkeypatch.setattr(ratelimit_fallback, "STORAGE_PAUSE_SECONDS", 0.0)


def fallbacks_counted() -> float:
    return REGISTRY.get_sample_value("gatehouse_rate_limit_fallbacks_total") or 0.0


def fallback_active() -> float | None:
    return REGISTRY.get_sample_value("gatehouse_rate_limit_fallback_active")


def requests_allowed(*, scope: RateLimitScope, key: str, tries: int) -> int:
    allowed = 0
    for _ in range(tries):
        try:
            rate_limit_http(scope=scope, key=key)
        except RateLimited:
            continue
        allowed += 1
    return allowed


def storage_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "core.ratelimit.limits"]


@pytest.mark.django_db
def test_with_the_store_down_limits_are_counted_per_process_and_the_outage_is_told_once(
    limits_config, caplog
):
    limits_config(storage_url=DEAD_REDIS_URL, authorize="3/minute", register="1/hour")
    before = fallbacks_counted()
    with caplog.at_level(logging.INFO, logger="core.ratelimit.limits"):
        assert requests_allowed(scope=RateLimitScope.AUTHORIZE, key="10.0.0.1", tries=5) == 3
        assert requests_allowed(scope=RateLimitScope.REGISTER, key="10.0.0.1", tries=3) == 1
    [message] = storage_messages(caplog)
    assert message.startswith(FALLBACK_BEGAN)
    assert caplog.records[0].levelno == logging.WARNING
    assert fallbacks_counted() == before + 1
    assert fallback_active() == 1
    outage = rate_limit_outage()
    assert outage is not None
    assert "limits are counted per process" in outage.reason


@pytest.mark.django_db
def test_with_the_store_down_sign_in_is_held_to_its_stricter_fallback_limit(limits_config):
    limits_config(storage_url=DEAD_REDIS_URL, login="5/minute", login_fallback="2/minute")
    assert requests_allowed(scope=LOGIN, key="10.0.0.1|erin", tries=5) == 2
    with pytest.raises(RateLimited) as refused:
        rate_limit_http(scope=LOGIN, key="10.0.0.1|erin")
    assert (refused.value.data or {}).get("limit") == "2 per 1 minute"
    # Another account keeps its own (fallback) budget.
    assert requests_allowed(scope=LOGIN, key="10.0.0.1|frank", tries=3) == 2


@pytest.mark.django_db
def test_a_sign_in_limit_stricter_than_the_fallback_is_kept(limits_config):
    limits_config(storage_url=DEAD_REDIS_URL, login="1/minute", login_fallback="2/minute")
    assert requests_allowed(scope=LOGIN, key="10.0.0.1|erin", tries=3) == 1


@pytest.mark.django_db
def test_without_a_login_limit_the_fallback_adds_none(limits_config):
    limits_config(storage_url=DEAD_REDIS_URL, authorize="1/minute")
    rate_limit_http(scope=RateLimitScope.AUTHORIZE, key="10.0.0.1")  # begins the outage
    assert requests_allowed(scope=LOGIN, key="10.0.0.1|erin", tries=5) == 5


@pytest.mark.django_db
def test_the_shared_count_comes_back_by_itself_when_the_store_answers_again(limits_config, no_pause, caplog):
    with SwitchableRedis() as redis, caplog.at_level(logging.INFO, logger="core.ratelimit.limits"):
        limits_config(storage_url=redis.url, login="5/minute", login_fallback="2/minute")
        assert requests_allowed(scope=LOGIN, key="10.0.0.1|erin", tries=3) == 3
        assert rate_limit_outage() is None

        redis.switch_off()
        assert requests_allowed(scope=LOGIN, key="10.0.0.1|erin", tries=3) == 2
        assert rate_limit_outage() is not None

        redis.switch_on()
        # Back in the shared count, which remembers the three calls made before the outage.
        assert requests_allowed(scope=LOGIN, key="10.0.0.1|erin", tries=3) == 2
    assert rate_limit_outage() is None
    assert fallback_active() == 0
    messages = storage_messages(caplog)
    assert [m.startswith(FALLBACK_BEGAN) for m in messages] == [True, False]
    assert messages[1].startswith(FALLBACK_ENDED)


@pytest.mark.django_db
def test_a_failed_store_is_asked_again_only_after_a_pause(limits_config):
    # Counted in connections, not seconds: a store that times out would cost every call that asks it.
    with SwitchableRedis() as redis:
        redis.switch_off()
        limits_config(storage_url=redis.url, authorize="2/minute")
        assert requests_allowed(scope=RateLimitScope.AUTHORIZE, key="10.0.0.1", tries=1) == 1
        asked = redis.connections
        assert asked >= 1, "the first call asks the store"
        # Well inside STORAGE_PAUSE_SECONDS: counted in the process, the store left alone.
        assert requests_allowed(scope=RateLimitScope.AUTHORIZE, key="10.0.0.1", tries=4) == 1
        assert redis.connections == asked


@pytest.mark.django_db(transaction=True)
async def test_mcp_calls_are_counted_per_process_while_the_store_is_down(limits_config):
    limits_config(storage_url=DEAD_REDIS_URL, tool="2/minute")
    allowed = 0
    try:
        for _ in range(5):
            try:
                await rate_limit_call(
                    identity=IdentityFactory.build(), scope=RateLimitScope.TOOL, target="whoami"
                )
            except RateLimited:
                continue
            allowed += 1
        # A burst at once is counted exactly in the process too.
        burst = await asyncio.gather(
            *(
                rate_limit_call(identity=IdentityFactory.build(), scope=RateLimitScope.TOOL, target="other")
                for _ in range(10)
            ),
            return_exceptions=True,
        )
    finally:
        await sync_to_async(connections.close_all)()
    assert allowed == 2
    assert sum(1 for outcome in burst if outcome is None) == 2
    assert rate_limit_outage() is not None

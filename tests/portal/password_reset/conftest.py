"""The person and the operator's rule the password reset tests use."""

from __future__ import annotations

import pytest

from accounts.models import User
from core.models import RateLimitRule, RateLimitScope
from tests.portal.password_reset.support import LIMIT
from tests.support.factories import UserFactory


@pytest.fixture
def grace() -> User:
    return UserFactory.create(username="grace", email="grace@example.com")


@pytest.fixture
def limit_rule(settings) -> RateLimitRule:
    """An operator's rule: LIMIT requests an hour (the default is 5), so a test reaches it quickly.
    Every refusal is its own audit row: counted ones would be written when the process exits, to
    the database of no test."""
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_REFUSAL_WINDOW_SECONDS": 0}
    return RateLimitRule.objects.create(scope=RateLimitScope.PASSWORD_RESET, limit=LIMIT, period_seconds=3600)
